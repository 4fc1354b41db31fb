// Strata's flat C API over the patched llama.cpp: plain pointers and integers only,
// so that Deno FFI and WebAssembly exports can call it without struct marshalling.
//
// A caller cannot crash it with arguments: every pointer comes with its length (elements,
// or bytes for text) and is checked against it, a NULL pointer with a nonzero length is
// refused, sizes and thread counts are bounded, and no C++ exception leaves an entry point.
//
// Errors: calls that fail return NULL or a negative code. Codes: -1 invalid input, -2 KV
// budget exhausted, -3 engine failure (out of memory included). The message is kept per
// handle: strata_model_error and strata_ctx_error read the last one of that model or
// context. Calls without a handle (loads, header reads, chat templates) write it into the
// caller's err buffer instead, so two engines in one process never see each other's errors.
#pragma once

#include <stdint.h>

#if defined(__EMSCRIPTEN__)
#  include <emscripten/emscripten.h>
#  define STRATA_API EMSCRIPTEN_KEEPALIVE
#else
#  define STRATA_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define STRATA_ERR_INPUT   (-1)
#define STRATA_ERR_KV_FULL (-2)
#define STRATA_ERR_ENGINE  (-3)

// Bounds on what a caller may ask for (a context is refused outside them).
#define STRATA_MAX_THREADS 256
#define STRATA_MAX_BATCH   65536
#define STRATA_MAX_CTX     (1 << 24)
// grammar text and JSON Schema bytes
#define STRATA_MAX_GRAMMAR (1 << 20)

typedef struct strata_model strata_model;
typedef struct strata_ctx   strata_ctx;
typedef struct strata_grammar strata_grammar;

// The last error of one model or context, written into buf (NUL-terminated, cut to cap).
// Returns the message's full length.
STRATA_API int32_t strata_model_error(const strata_model * model, char * buf, int32_t cap);
STRATA_API int32_t strata_ctx_error(const strata_ctx * ctx, char * buf, int32_t cap);

// llama.cpp log lines at or above this level reach stderr: 0 none, 1 error, 2 warn, 3 info, 4 debug.
STRATA_API void strata_log_level(int32_t level);
// Registered backends, comma separated (e.g. "CPU" or "Vulkan,CPU"), written into buf.
STRATA_API int32_t strata_backends(char * buf, int32_t cap);

// Architecture of a GGUF file, from its header only. Returns the name length or a negative code.
STRATA_API int32_t strata_file_arch(const char * path, char * buf, int32_t cap, char * err, int32_t err_cap);

// Loads layers [layer_start, layer_end) (layer_end <= 0: through the last layer).
// vocab_only != 0 loads only the tokenizer and chat template. NULL on failure (why: err).
STRATA_API strata_model * strata_model_load(const char * path, int32_t layer_start, int32_t layer_end,
                                            int32_t n_gpu_layers, int32_t vocab_only,
                                            char * err, int32_t err_cap);
STRATA_API void strata_model_free(strata_model * model);

// Model facts, in this order: n_layer, seam width (the floats of one hidden-state row: n_embd,
// or hc_mult x n_embd for deepseek4's residual streams), n_vocab, n_ctx_train, layer_start,
// layer_end, n_head, n_head_kv, weight bytes loaded, n_expert. Returns how many were written.
STRATA_API int32_t strata_model_facts(const strata_model * model, int64_t * out, int32_t cap);
STRATA_API int32_t strata_model_arch(const strata_model * model, char * buf, int32_t cap);

// Tokenizer and chat template (any load, vocab-only included). text holds len bytes (no NUL needed).
// Returns the token count, which may exceed cap: call again with a larger buffer.
STRATA_API int32_t strata_tokenize(const strata_model * model, const char * text, int32_t len,
                                   int32_t add_special, int32_t parse_special, int32_t * out, int32_t cap);
STRATA_API int32_t strata_token_piece(const strata_model * model, int32_t token, char * buf, int32_t cap);
STRATA_API int32_t strata_token_is_eog(const strata_model * model, int32_t token);
// bos, eos, eot (-1 when absent).
STRATA_API int32_t strata_special_tokens(const strata_model * model, int32_t * out, int32_t cap);
STRATA_API int32_t strata_chat_template(const strata_model * model, char * buf, int32_t cap);
// msgs holds n_msgs pairs "role\0content\0" in msgs_len bytes; the formatted prompt goes to buf.
// Returns the full length (may exceed cap: call again with a larger buffer).
STRATA_API int32_t strata_chat_apply(const char * tmpl, const char * msgs, int32_t msgs_len, int32_t n_msgs,
                                     int32_t add_assistant, char * buf, int32_t cap,
                                     char * err, int32_t err_cap);

// Context flags.
// CAPTURE enables strata_ctx_capture (reference runs only: it splits the graph).
// BATCH_INVARIANT: a sequence's outputs are bit-identical whether it runs alone or batched with
// any others: the KV pool keeps each sequence's cells in position order (a sequence's next cell
// is always above its others, and a pool that runs short compacts itself keeping that order),
// and the CPU runs its reference kernels: the same kernel for every batch shape (no sgemm, no
// repacked 4-row gemm, no fusion), and flash attention that reads each row's own sequence's
// cells, gathered in order, in tiles cut from those cells alone (patch 0018). Any batch is one
// graph pass, whatever its sequences' ids. Where the
// order cannot be kept (attention not fused, a cache of another kind), each sequence gets its
// own KV stream of n_ctx / n_seq_max cells instead (STRATA_KV_STREAMS; a batch then splits into
// one pass per run of consecutive sequence ids).
#define STRATA_CTX_CAPTURE         1
#define STRATA_CTX_BATCH_INVARIANT 2

// How a context's KV cache holds its sequences (strata_ctx_stats).
#define STRATA_KV_SHARED  0  // one pool in any order (not batch-invariant)
#define STRATA_KV_ORDERED 1  // one pool, each sequence's cells in position order
#define STRATA_KV_STREAMS 2  // one stream of n_ctx / n_seq_max cells per sequence

// A context holds n_ctx KV cells for up to n_seq_max sequences, and one CPU thread pool of
// n_threads for its whole life.
STRATA_API strata_ctx * strata_ctx_new(strata_model * model, int32_t n_ctx, int32_t n_seq_max,
                                       int32_t n_batch, int32_t n_threads, int32_t flags,
                                       char * err, int32_t err_cap);
STRATA_API void strata_ctx_free(strata_ctx * ctx);
// Threads for later decodes: 1 to the pool's size.
STRATA_API int32_t strata_ctx_threads(strata_ctx * ctx, int32_t n_threads);

// One mixed batch of n_tokens: token ids (first range, n_tokens of them) or hidden states
// (other ranges, n_tokens x seam width floats), with a position and a sequence per token.
// outputs (n_tokens flags, or NULL) marks the tokens whose result is wanted (ranges without
// the output head return every token). Each *_len is the array's element count and must
// match (int32_t: an export with an int64_t parameter cannot resume after a WebGPU wait under
// emscripten 3.1.6's ASYNCIFY). Returns the number of output rows.
STRATA_API int32_t strata_decode(strata_ctx * ctx, int32_t n_tokens,
                                 const int32_t * tokens, int32_t tokens_len,
                                 const float * hidden, int32_t hidden_len,
                                 const int32_t * pos, int32_t pos_len,
                                 const int32_t * seq, int32_t seq_len,
                                 const uint8_t * outputs, int32_t outputs_len);
// Graph passes the last decode took: 1, or one per ubatch where llama.cpp had to split the batch.
STRATA_API int32_t strata_ctx_last_passes(const strata_ctx * ctx);
// Keeps this process's core from idling for window_ms after every decode: a thread of the lowest
// priority (SCHED_IDLE, so any other thread takes the core from it at once) spins meanwhile. A
// core that halted between steps wakes slowly (a virtual machine's most of all) when the next
// step's bytes arrive, and computes slower for a while. 0 stops it. Returns 1 when it runs, 0
// where it cannot at that priority or this build has none (not Linux; WebAssembly).
STRATA_API int32_t strata_keep_awake(int32_t window_ms);
// Width of one output row: n_vocab logits on the last range, seam width hidden floats elsewhere.
STRATA_API int32_t strata_output_dim(const strata_ctx * ctx);
// Copies the last decode's output rows, in batch order. Returns floats written.
STRATA_API int64_t strata_outputs(strata_ctx * ctx, float * dst, int64_t cap);

STRATA_API int32_t strata_seq_release(strata_ctx * ctx, int32_t seq);
// Forgets positions >= pos of seq (a route repair takes back a step some hops ran and others not).
STRATA_API int32_t strata_seq_trim(strata_ctx * ctx, int32_t seq, int32_t pos);
// Makes dst hold positions [0, pos) of src, and nothing else (what it held goes). Only in an
// ordered pool (STRATA_KV_ORDERED): the two then share those cells, and no K or V is copied.
STRATA_API int32_t strata_seq_copy(strata_ctx * ctx, int32_t src, int32_t dst, int32_t pos);
// A sequence's KV as bytes (llama.cpp's per-sequence state: its cells' positions, then each of
// this context's layers' K and V rows), to move it to another node of the same recipe and range.
// Only in an ordered pool. strata_seq_state_size: the bytes it takes now (0 when empty);
// strata_seq_state_get: writes them, returns bytes written or < 0.
STRATA_API int64_t strata_seq_state_size(strata_ctx * ctx, int32_t seq);
STRATA_API int64_t strata_seq_state_get(strata_ctx * ctx, int32_t seq, uint8_t * dst, int64_t cap);
// Makes seq hold what the bytes hold (what it held goes). Returns the positions it now holds, or
// < 0 when llama.cpp refuses them (another layout, layer count or width; no room): seq is then empty.
STRATA_API int32_t strata_seq_state_set(strata_ctx * ctx, int32_t seq, const uint8_t * src, int64_t len);
// Highest position held for seq, -1 when empty.
STRATA_API int32_t strata_seq_pos_max(strata_ctx * ctx, int32_t seq);
// kv cells total, kv cells used, kv bytes, n_seq_max, the cells one sequence may hold, graph
// passes since the context was made, the KV mode (STRATA_KV_*), compute buffer bytes. Returns how
// many were written.
STRATA_API int32_t strata_ctx_stats(strata_ctx * ctx, int64_t * out, int32_t cap);

// Reference runs: record the residual stream after each listed layer during the next decodes.
STRATA_API int32_t strata_ctx_capture(strata_ctx * ctx, const int32_t * layers, int32_t n);
// Copies what was recorded after layer il (n_tokens x seam width floats). Returns floats written.
STRATA_API int64_t strata_ctx_captured(strata_ctx * ctx, int32_t il, float * dst, int64_t cap);

// Constrained decoding (api/strata-grammar.cpp): llama.cpp's grammar sampler in GBNF over the
// model's vocabulary (any load, vocab-only included), root rule "root". With triggers it is lazy:
// it constrains nothing until the text matches one of n_patterns regexes (NUL-terminated, packed
// in patterns_len bytes) or one of n_tokens tokens is sampled. NULL on failure (why: err).
// A grammar is used by one caller at a time; its errors are read with strata_grammar_error.
STRATA_API strata_grammar * strata_grammar_new(const strata_model * model, const char * text, int32_t len,
                                               const char * patterns, int32_t patterns_len, int32_t n_patterns,
                                               const int32_t * tokens, int32_t n_tokens,
                                               char * err, int32_t err_cap);
STRATA_API void strata_grammar_free(strata_grammar * g);
STRATA_API int32_t strata_grammar_error(const strata_grammar * g, char * buf, int32_t cap);
// Sets the logits (n = the vocabulary's size) of the tokens the grammar rejects next to -INFINITY.
// Returns how many tokens it allows (0: none, the grammar is at a dead end).
STRATA_API int32_t strata_grammar_apply(strata_grammar * g, float * logits, int32_t n);
// Advances past token; a token the grammar does not allow here is refused (STRATA_ERR_INPUT) and
// leaves the grammar as it was. An end-of-generation token that it allows changes nothing.
STRATA_API int32_t strata_grammar_accept(strata_grammar * g, int32_t token);

// A JSON Schema (len bytes) as GBNF, by llama.cpp's converter (api/strata-schema.cpp; native
// builds with STRATA_CHAT). Returns the grammar's full length (may exceed cap: call again with a larger
// buffer), or STRATA_ERR_INPUT with the reason in err.
STRATA_API int32_t strata_json_schema_grammar(const char * schema, int32_t len, char * buf, int32_t cap,
                                              char * err, int32_t err_cap);

// Tool calling in the model's own chat format, by llama.cpp's chat machinery (api/strata-chat.cpp;
// native builds with STRATA_CHAT). A chat holds the model's templates (NULL on failure, why: err).
typedef struct strata_chat strata_chat;
STRATA_API strata_chat * strata_chat_new(const strata_model * model, char * err, int32_t err_cap);
STRATA_API void strata_chat_free(strata_chat * chat);
// What the template supports, as a JSON object of booleans (supports_tool_calls, …).
STRATA_API int32_t strata_chat_caps(const strata_chat * chat, char * buf, int32_t cap);
// req: JSON {messages, tools, tool_choice, parallel_tool_calls} as OpenAI's API has them. Writes JSON
// {prompt, grammar, lazy, trigger_patterns, trigger_tokens, prefill, additional_stops,
// preserved_tokens, parser}. Returns its full length (may exceed cap: call again with a larger
// buffer), or STRATA_ERR_INPUT with the reason in err.
STRATA_API int32_t strata_chat_apply_tools(const strata_chat * chat, const char * req, int32_t len, char * buf,
                                           int32_t cap, char * err, int32_t err_cap);
// Reads an answer with the `parser` that strata_chat_apply_tools gave: JSON {content, tool_calls:
// [{name, arguments, id}]}. Returns its full length, or STRATA_ERR_INPUT with the reason in err.
STRATA_API int32_t strata_chat_parse(const char * parser, int32_t parser_len, const char * text, int32_t text_len,
                                     char * buf, int32_t cap, char * err, int32_t err_cap);

#ifdef __cplusplus
}
#endif
