// Flat C API of Strata's engine. See strata.h for the contract.
#include "strata.h"
#include "strata-internal.h"

#include "gguf.h"
#include "ggml-cpu.h"
#include "llama.h"
#include "llama-context.h"
#include "llama-memory.h"
#include "llama-model.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

const char * const kArchs[] = {"llama", "qwen2", "qwen3", "qwen3moe", "gemma3", "deepseek2", "glm4moe", "glm-dsa", "deepseek32", "deepseek4"};

// the width of one hidden-state row at a seam: n_embd, or the whole residual stream where an
// architecture keeps more than that (deepseek4's hc_mult streams of n_embd)
int64_t seam_width(const llama_model * m) { return llama_model_n_embd_out(m); }

std::atomic<int> g_log_level{1};
// the last warning or error llama.cpp logged on this thread, quoted in our errors: per thread,
// because engines in one process run their calls on different threads
thread_local std::string t_log_tail;
// the loader's own reason ("error loading model: …"), which a generic line follows
thread_local std::string t_log_cause;

// One error message, owned by a model, a context, or a call without a handle.
struct err_slot {
    mutable std::mutex mu;
    std::string        msg;

    void set(const std::string & m) {
        std::lock_guard<std::mutex> lock(mu);
        msg = m;
    }
    std::string get() const {
        std::lock_guard<std::mutex> lock(mu);
        return msg;
    }
};

int32_t fail(err_slot & e, int32_t code, const std::string & msg) {
    e.set(msg);
    return code;
}

std::string log_tail() {
    std::string s = t_log_cause.empty() ? t_log_tail : t_log_cause;
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    return s;
}

void on_log(ggml_log_level level, const char * text, void *) {
    // ggml: DEBUG 1, INFO 2, WARN 3, ERROR 4; ours: 1 error .. 4 debug
    const int ours = level == GGML_LOG_LEVEL_ERROR ? 1 : level == GGML_LOG_LEVEL_WARN ? 2 :
                     level == GGML_LOG_LEVEL_INFO  ? 3 : level == GGML_LOG_LEVEL_DEBUG ? 4 : 0;
    if (ours == 1 || ours == 2) t_log_tail = text;
    static const char kCause[] = "error loading model: ";
    if (const char * at = ours == 1 ? strstr(text, kCause) : nullptr) t_log_cause = at + sizeof(kCause) - 1;
    if (ours != 0 && ours <= g_log_level.load()) fputs(text, stderr);
}

// Runs the body of an entry point: no C++ exception crosses extern "C" (std::terminate would
// take the whole process down); it becomes an error code with its message in e.
template <typename R, typename F>
R guarded(err_slot & e, R on_error, F && body) {
    t_log_tail.clear();
    t_log_cause.clear();
    try {
        return body();
    } catch (const std::bad_alloc &) {
        e.set("out of memory");
    } catch (const std::exception & x) {
        e.set(std::string("engine exception: ") + x.what());
    } catch (...) {
        e.set("engine exception");
    }
    return on_error;
}

// A buffer and its capacity: NULL is fine only with capacity 0.
bool bad_buf(const void * p, int64_t cap) {
    return cap < 0 || (!p && cap > 0);
}

void ensure_init() {
    static std::once_flag once;
    std::call_once(once, [] {
        llama_log_set(on_log, nullptr);
        llama_backend_init();
    });
}

int32_t copy_str(const std::string & s, char * buf, int32_t cap) {
    if (buf && cap > 0) {
        const size_t n = std::min<size_t>(s.size(), (size_t) cap - 1);
        memcpy(buf, s.data(), n);
        buf[n] = 0;
    }
    return (int32_t) std::min<size_t>(s.size(), INT32_MAX);
}

// A call without a handle: its error goes into the caller's buffer.
struct call_err {
    err_slot slot;
    char *   buf;
    int32_t  cap;
    call_err(char * b, int32_t c) : buf(c > 0 ? b : nullptr), cap(b ? c : 0) {}
    ~call_err() {
        const std::string m = slot.get();
        if (!m.empty()) copy_str(m, buf, cap);
    }
};

// general.architecture and the trunk's layer count from the header alone: <arch>.block_count
// less the nextn (MTP) layers. An architecture may still change it on load (the model's own
// count is what a load reports).
bool read_header(const char * path, std::string & arch, int64_t & n_layer) {
    gguf_init_params params = { /*.no_alloc =*/ true, /*.ctx =*/ nullptr };
    gguf_context * g = gguf_init_from_file(path, params);
    if (!g) return false;
    const int64_t ka = gguf_find_key(g, "general.architecture");
    if (ka >= 0 && gguf_get_kv_type(g, ka) == GGUF_TYPE_STRING) {
        arch = gguf_get_val_str(g, ka);
    }
    n_layer = -1;
    const int64_t kb = gguf_find_key(g, (arch + ".block_count").c_str());
    if (kb >= 0 && gguf_get_kv_type(g, kb) == GGUF_TYPE_UINT32) {
        n_layer = gguf_get_val_u32(g, kb);
        const int64_t kn = gguf_find_key(g, (arch + ".nextn_predict_layers").c_str());
        if (kn >= 0 && gguf_get_kv_type(g, kn) == GGUF_TYPE_UINT32) {
            n_layer -= std::min<int64_t>(n_layer, gguf_get_val_u32(g, kn));
        }
    }
    gguf_free(g);
    return !arch.empty();
}

// bytes of the weights this instance holds (llama_model_size counts the whole file)
int64_t weight_bytes(const llama_model * m) {
    int64_t n = 0;
    for (const auto & it : m->tensors_by_name) n += (int64_t) ggml_nbytes(it.second);
    return n;
}

bool arch_supported(const std::string & arch) {
    for (const char * a : kArchs) {
        if (arch == a) return true;
    }
    return false;
}

#if defined(STRATA_WASM_WEBGPU)
#  if defined(STRATA_WEBGPU_SHIM)
extern "C" char * strata_webgpu_problem(void);  // library_strata_webgpu.js, malloc'd
#  endif
// The WebGPU build offloads layers only where a GPU device registered; otherwise the load fails
// with the reason, so that the caller can fall back to the CPU build.
bool gpu_missing(std::string & why) {
    for (size_t i = 0; i < ggml_backend_dev_count(); ++i) {
        const auto type = ggml_backend_dev_type(ggml_backend_dev_get(i));
        if (type == GGML_BACKEND_DEVICE_TYPE_GPU || type == GGML_BACKEND_DEVICE_TYPE_IGPU) return false;
    }
    why = "no WebGPU device";
#  if defined(STRATA_WEBGPU_SHIM)
    char * p = strata_webgpu_problem();
    if (p && *p) why += std::string(": ") + p;
    free(p);
#  endif
    return true;
}
#endif

} // namespace

struct strata_model {
    llama_model * m = nullptr;
    std::string   arch;
    int32_t       n_layer = 0;
    int32_t       start   = 0;
    int32_t       end     = 0;
    bool          vocab_only = false;
    err_slot      err;

    bool first() const { return start == 0; }
    bool last()  const { return end == n_layer; }
};

struct strata_ctx {
    strata_model  * model = nullptr;
    llama_context * c     = nullptr;
    int32_t n_seq_max = 0;
    int32_t n_batch   = 0;
    int32_t n_outputs = 0;
    // how the KV cache holds sequences: STRATA_KV_SHARED, STRATA_KV_ORDERED or STRATA_KV_STREAMS
    int32_t kv_mode   = 0;
    // graph passes of the last decode (ubatches: 1 unless the batch had to split)
    int32_t last_passes = 0;
    err_slot err;

    // reusable batch arrays
    std::vector<int32_t>        n_seq_id;
    std::vector<llama_seq_id *> seq_ptr;
    std::vector<int8_t>         logits;

    // the CPU threads live as long as the context (see strata_ctx_new)
    ggml_threadpool_t threadpool = nullptr;
    int32_t           n_threads  = 0;

    // reference capture of the residual stream after chosen layers
    std::vector<int32_t>                 capture_layers;
    std::map<int32_t, std::vector<float>> captured;
    bool                                 capture_failed = false;
};

namespace {

bool on_eval(ggml_tensor * t, bool ask, void * user) {
    auto * s = static_cast<strata_ctx *>(user);
    int il = -1;
    int end = 0;
    // a layer's output: l_out, or l_last where the residual is wider than n_embd (deepseek4);
    // the whole name, not a view of it ("l_last-2 (reshaped)")
    const bool named = (sscanf(t->name, "l_out-%d%n", &il, &end) == 1 || sscanf(t->name, "l_last-%d%n", &il, &end) == 1) &&
                       t->name[end] == '\0';
    if (!named) {
        return ask ? false : true;
    }
    const bool wanted = std::find(s->capture_layers.begin(), s->capture_layers.end(), il) != s->capture_layers.end();
    if (ask) return wanted;
    if (wanted && t->type == GGML_TYPE_F32 && ggml_is_contiguous(t)) {
        // called from ggml's C code: nothing may unwind through it
        try {
            auto & dst = s->captured[il];
            const size_t n = ggml_nelements(t);
            const size_t off = dst.size();
            dst.resize(off + n);
            ggml_backend_tensor_get(t, dst.data() + off, 0, n * sizeof(float));
        } catch (...) {
            s->capture_failed = true;
            return false;
        }
    }
    return true;
}

void free_ctx(strata_ctx * ctx) {
    if (ctx->c) {
        if (ctx->threadpool) llama_detach_threadpool(ctx->c);
        llama_free(ctx->c);
    }
    if (ctx->threadpool) ggml_threadpool_free(ctx->threadpool);
    delete ctx;
}

// A model-facing call that needs a model (with or without weights).
#define NEED_MODEL(model)                                                        \
    do {                                                                         \
        if (!(model)) return STRATA_ERR_INPUT;                                   \
    } while (0)

} // namespace

const llama_model * strata_model_llama(const strata_model * model) { return model ? model->m : nullptr; }

std::string strata_log_tail(bool clear) {
    if (clear) {
        t_log_tail.clear();
        t_log_cause.clear();
        return "";
    }
    return log_tail();
}

int32_t strata_copy_str(const std::string & s, char * buf, int32_t cap) { return copy_str(s, buf, cap); }

extern "C" {

int32_t strata_model_error(const strata_model * model, char * buf, int32_t cap) {
    if (!model || bad_buf(buf, cap)) return STRATA_ERR_INPUT;
    return copy_str(model->err.get(), buf, cap);
}

int32_t strata_ctx_error(const strata_ctx * ctx, char * buf, int32_t cap) {
    if (!ctx || bad_buf(buf, cap)) return STRATA_ERR_INPUT;
    return copy_str(ctx->err.get(), buf, cap);
}

void strata_log_level(int32_t level) {
    g_log_level.store(level);
}

int32_t strata_backends(char * buf, int32_t cap) {
    if (bad_buf(buf, cap)) return STRATA_ERR_INPUT;
    err_slot e;
    return guarded(e, STRATA_ERR_ENGINE, [&] {
        ensure_init();
        std::string out;
        for (size_t i = 0; i < ggml_backend_reg_count(); ++i) {
            if (!out.empty()) out += ",";
            out += ggml_backend_reg_name(ggml_backend_reg_get(i));
        }
        return copy_str(out, buf, cap);
    });
}

int32_t strata_file_arch(const char * path, char * buf, int32_t cap, char * err, int32_t err_cap) {
    call_err e(err, err_cap);
    if (bad_buf(buf, cap)) return fail(e.slot, STRATA_ERR_INPUT, "file arch: NULL buffer with a nonzero capacity");
    return guarded(e.slot, STRATA_ERR_ENGINE, [&] {
        std::string arch;
        int64_t n_layer = 0;
        if (!path || !read_header(path, arch, n_layer)) {
            return fail(e.slot, STRATA_ERR_INPUT, std::string("not a readable GGUF file: ") + (path ? path : "(null)"));
        }
        return copy_str(arch, buf, cap);
    });
}

strata_model * strata_model_load(const char * path, int32_t layer_start, int32_t layer_end,
                                 int32_t n_gpu_layers, int32_t vocab_only, char * err, int32_t err_cap) {
    call_err e(err, err_cap);
    return guarded(e.slot, (strata_model *) nullptr, [&]() -> strata_model * {
        ensure_init();
        std::string arch;
        int64_t n_layer = 0;
        if (!path || !read_header(path, arch, n_layer)) {
            fail(e.slot, STRATA_ERR_INPUT, std::string("not a readable GGUF file: ") + (path ? path : "(null)"));
            return nullptr;
        }
        if (!arch_supported(arch)) {
            fail(e.slot, STRATA_ERR_INPUT, "unsupported architecture '" + arch + "': Strata runs llama, qwen2, qwen3, qwen3moe, gemma3, deepseek2, glm4moe, glm-dsa and deepseek32");
            return nullptr;
        }
        const int32_t end = layer_end > 0 ? layer_end : (int32_t) n_layer;
        // a GGUF of nextn layers alone (no trunk) loads whole
        const bool mtp_only = n_layer == 0 && layer_start == 0 && layer_end <= 0;
        if (!vocab_only && !mtp_only && (n_layer <= 0 || layer_start < 0 || layer_start >= end || end > n_layer)) {
            fail(e.slot, STRATA_ERR_INPUT, "invalid layer range [" + std::to_string(layer_start) + ", " + std::to_string(end) +
                                           ") for a model with " + std::to_string(n_layer) + " layers");
            return nullptr;
        }

#if defined(STRATA_WASM_WEBGPU)
        std::string why;
        if (!vocab_only && n_gpu_layers > 0 && gpu_missing(why)) {
            fail(e.slot, STRATA_ERR_ENGINE, why);
            return nullptr;
        }
#endif
        llama_model_params p = llama_model_default_params();
        p.n_gpu_layers = n_gpu_layers;
        p.layer_start  = vocab_only ? 0 : layer_start;
        // through the last layer: the loader knows the trunk's length once the architecture has read it
        p.layer_end    = vocab_only ? 0 : layer_end > 0 ? layer_end : 0;
        p.vocab_only   = vocab_only != 0;
#if defined(__EMSCRIPTEN__)
        // emscripten's mmap copies the whole file into the heap: read only the range's tensors
        // instead (a shard's sparse download has nothing else to map, and wasm32 has 4 GiB)
        p.load_mode    = LLAMA_LOAD_MODE_NONE;
#else
        // a range reads only its own tensors: mapping the file would fault all of it in
        // (MAP_POPULATE) and a node would hold the whole model it is meant to share
        const bool whole = vocab_only || (layer_start == 0 && (layer_end <= 0 || end == (int32_t) n_layer));
        if (!whole) p.load_mode = LLAMA_LOAD_MODE_NONE;
#endif

        llama_model * m = llama_model_load_from_file(path, p);
        if (!m) {
            fail(e.slot, STRATA_ERR_ENGINE, "failed to load " + std::string(path) + ": " + log_tail());
            return nullptr;
        }
        auto * s = new strata_model();
        s->m          = m;
        s->arch       = arch;
        s->n_layer    = vocab_only ? (int32_t) n_layer : (int32_t) m->hparams.n_layer();
        s->start      = vocab_only ? 0 : (int32_t) m->hparams.il_start;
        s->end        = vocab_only ? (int32_t) n_layer : (int32_t) m->hparams.il_end;
        s->vocab_only = vocab_only != 0;
        return s;
    });
}

void strata_model_free(strata_model * model) {
    if (!model) return;
    err_slot e;
    guarded(e, 0, [&] {
        llama_model_free(model->m);
        return 0;
    });
    delete model;
}

int32_t strata_model_facts(const strata_model * model, int64_t * out, int32_t cap) {
    NEED_MODEL(model);
    err_slot & e = const_cast<strata_model *>(model)->err;
    if (bad_buf(out, cap)) return fail(e, STRATA_ERR_INPUT, "facts: NULL buffer with a nonzero capacity");
    return guarded(e, STRATA_ERR_ENGINE, [&] {
        const llama_model * m = model->m;
        const int64_t facts[] = {
            model->n_layer,
            model->vocab_only ? 0 : seam_width(m),
            llama_vocab_n_tokens(llama_model_get_vocab(m)),
            model->vocab_only ? 0 : llama_model_n_ctx_train(m),
            model->start,
            model->end,
            model->vocab_only ? 0 : llama_model_n_head(m),
            model->vocab_only ? 0 : llama_model_n_head_kv(m),
            weight_bytes(m),
            (int64_t) m->hparams.n_expert,
        };
        const int32_t n = std::min<int32_t>(cap, (int32_t) (sizeof(facts) / sizeof(facts[0])));
        for (int32_t i = 0; i < n; ++i) out[i] = facts[i];
        return n;
    });
}

int32_t strata_model_arch(const strata_model * model, char * buf, int32_t cap) {
    NEED_MODEL(model);
    if (bad_buf(buf, cap)) return fail(const_cast<strata_model *>(model)->err, STRATA_ERR_INPUT, "arch: NULL buffer with a nonzero capacity");
    return copy_str(model->arch, buf, cap);
}

int32_t strata_tokenize(const strata_model * model, const char * text, int32_t len,
                        int32_t add_special, int32_t parse_special, int32_t * out, int32_t cap) {
    NEED_MODEL(model);
    err_slot & e = const_cast<strata_model *>(model)->err;
    if (bad_buf(text, len)) return fail(e, STRATA_ERR_INPUT, "tokenize: NULL text with a nonzero length, or a negative length");
    if (bad_buf(out, cap)) return fail(e, STRATA_ERR_INPUT, "tokenize: NULL token buffer with a nonzero capacity");
    return guarded(e, STRATA_ERR_ENGINE, [&] {
        const int32_t n = llama_tokenize(llama_model_get_vocab(model->m), text ? text : "", len, out, cap,
                                         add_special != 0, parse_special != 0);
        // a negative count asks for a larger buffer: report the size needed as a positive number
        if (n == INT32_MIN) return fail(e, STRATA_ERR_INPUT, "tokenize: too many tokens");
        return n < 0 ? -n : n;
    });
}

int32_t strata_token_piece(const strata_model * model, int32_t token, char * buf, int32_t cap) {
    NEED_MODEL(model);
    err_slot & e = const_cast<strata_model *>(model)->err;
    if (bad_buf(buf, cap)) return fail(e, STRATA_ERR_INPUT, "token piece: NULL buffer with a nonzero capacity");
    return guarded(e, STRATA_ERR_ENGINE, [&] {
        const llama_vocab * v = llama_model_get_vocab(model->m);
        if (token < 0 || token >= llama_vocab_n_tokens(v)) {
            return fail(e, STRATA_ERR_INPUT, "token id " + std::to_string(token) + " outside the vocabulary");
        }
        const int32_t n = llama_token_to_piece(v, token, buf, cap, 0, false);
        return n < 0 ? -n : n;
    });
}

int32_t strata_token_is_eog(const strata_model * model, int32_t token) {
    NEED_MODEL(model);
    const llama_vocab * v = llama_model_get_vocab(model->m);
    if (token < 0 || token >= llama_vocab_n_tokens(v)) {
        return fail(const_cast<strata_model *>(model)->err, STRATA_ERR_INPUT,
                    "token id " + std::to_string(token) + " outside the vocabulary");
    }
    return llama_vocab_is_eog(v, token) ? 1 : 0;
}

int32_t strata_special_tokens(const strata_model * model, int32_t * out, int32_t cap) {
    NEED_MODEL(model);
    if (bad_buf(out, cap)) {
        return fail(const_cast<strata_model *>(model)->err, STRATA_ERR_INPUT, "special tokens: NULL buffer with a nonzero capacity");
    }
    const llama_vocab * v = llama_model_get_vocab(model->m);
    const int32_t ids[] = { llama_vocab_bos(v), llama_vocab_eos(v), llama_vocab_eot(v) };
    const int32_t n = std::min<int32_t>(cap, 3);
    for (int32_t i = 0; i < n; ++i) out[i] = ids[i];
    return n;
}

int32_t strata_chat_template(const strata_model * model, char * buf, int32_t cap) {
    NEED_MODEL(model);
    err_slot & e = const_cast<strata_model *>(model)->err;
    if (bad_buf(buf, cap)) return fail(e, STRATA_ERR_INPUT, "chat template: NULL buffer with a nonzero capacity");
    const char * t = llama_model_chat_template(model->m, nullptr);
    return t ? copy_str(t, buf, cap) : fail(e, STRATA_ERR_INPUT, "the model carries no chat template");
}

int32_t strata_chat_apply(const char * tmpl, const char * msgs, int32_t msgs_len, int32_t n_msgs,
                          int32_t add_assistant, char * buf, int32_t cap, char * err, int32_t err_cap) {
    call_err e(err, err_cap);
    if (!tmpl) return fail(e.slot, STRATA_ERR_INPUT, "chat: NULL template");
    if (n_msgs < 0 || bad_buf(msgs, msgs_len) || (n_msgs > 0 && msgs_len == 0)) {
        return fail(e.slot, STRATA_ERR_INPUT, "chat: messages missing or shorter than their count");
    }
    if (bad_buf(buf, cap)) return fail(e.slot, STRATA_ERR_INPUT, "chat: NULL buffer with a nonzero capacity");
    return guarded(e.slot, STRATA_ERR_ENGINE, [&] {
        // every role and content must end inside the msgs_len bytes given
        std::vector<llama_chat_message> chat;
        int32_t off = 0;
        auto next = [&](const char *& out) {
            const void * nul = off < msgs_len ? memchr(msgs + off, 0, (size_t) (msgs_len - off)) : nullptr;
            if (!nul) return false;
            out = msgs + off;
            off = (int32_t) ((const char *) nul - msgs) + 1;
            return true;
        };
        for (int32_t i = 0; i < n_msgs; ++i) {
            const char * role    = nullptr;
            const char * content = nullptr;
            if (!next(role) || !next(content)) {
                return fail(e.slot, STRATA_ERR_INPUT, "chat: message " + std::to_string(i) + " runs past the " +
                                                      std::to_string(msgs_len) + " bytes given");
            }
            chat.push_back({ role, content });
        }
        const int32_t n = llama_chat_apply_template(tmpl, chat.data(), chat.size(), add_assistant != 0, buf, cap);
        return n < 0 ? fail(e.slot, STRATA_ERR_INPUT, "chat template not supported by llama.cpp's built-in formats") : n;
    });
}

strata_ctx * strata_ctx_new(strata_model * model, int32_t n_ctx, int32_t n_seq_max,
                            int32_t n_batch, int32_t n_threads, int32_t flags, char * err, int32_t err_cap) {
    call_err e(err, err_cap);
    if (!model || model->vocab_only) {
        fail(e.slot, STRATA_ERR_INPUT, "a context needs a model loaded with weights");
        return nullptr;
    }
    if (n_ctx <= 0 || n_ctx > STRATA_MAX_CTX || n_seq_max <= 0 || n_seq_max > LLAMA_MAX_SEQ ||
        n_batch <= 0 || n_batch > STRATA_MAX_BATCH || n_threads <= 0 || n_threads > STRATA_MAX_THREADS ||
        (flags & ~(STRATA_CTX_CAPTURE | STRATA_CTX_BATCH_INVARIANT)) != 0) {
        fail(e.slot, STRATA_ERR_INPUT,
             "context: n_ctx in [1, " + std::to_string(STRATA_MAX_CTX) + "], n_seq_max in [1, " +
                 std::to_string(LLAMA_MAX_SEQ) + "], n_batch in [1, " + std::to_string(STRATA_MAX_BATCH) +
                 "] and n_threads in [1, " + std::to_string(STRATA_MAX_THREADS) + "], known flags; got " +
                 std::to_string(n_ctx) + ", " + std::to_string(n_seq_max) + ", " + std::to_string(n_batch) + ", " +
                 std::to_string(n_threads) + ", flags " + std::to_string(flags));
        return nullptr;
    }
    strata_ctx * s = nullptr;
    strata_ctx * made = guarded(e.slot, (strata_ctx *) nullptr, [&]() -> strata_ctx * {
        s = new strata_ctx();
        s->model     = model;
        s->n_seq_max = n_seq_max;
        s->n_batch   = n_batch;
        s->n_seq_id.assign(n_batch, 1);
        s->seq_ptr.assign(n_batch, nullptr);
        s->logits.assign(n_batch, 0);

        const bool invariant = (flags & STRATA_CTX_BATCH_INVARIANT) != 0;
        // invariant: one pool whose cells stay in position order within each sequence (see
        // llama_set_kv_ordered); where the context cannot keep that order, one stream per
        // sequence (each holds n_ctx / n_seq_max cells, in order by construction)
        for (const bool unified : { true, false }) {
            if (!unified && !invariant) break;
            llama_context_params cp = llama_context_default_params();
            cp.n_ctx           = (uint32_t) n_ctx;
            cp.n_batch         = (uint32_t) n_batch;
            cp.n_ubatch        = (uint32_t) n_batch;
            cp.n_seq_max       = (uint32_t) n_seq_max;
            cp.n_threads       = n_threads;
            cp.n_threads_batch = n_threads;
            cp.kv_unified      = unified;
            // sliding-window layers (Gemma 3) keep every cell, as global ones do: a windowed cache
            // drops cells past the window, and a route repair's trim could not take a step back
            cp.swa_full        = true;
            cp.no_perf         = true;
            // ranges without the head hand on the raw residual stream of every token
            cp.embeddings      = !model->last();
            cp.pooling_type    = LLAMA_POOLING_TYPE_NONE;
            if (flags & STRATA_CTX_CAPTURE) {
                cp.cb_eval           = on_eval;
                cp.cb_eval_user_data = s;
            }
            s->c = llama_init_from_model(model->m, cp);
            if (!s->c) {
                fail(e.slot, STRATA_ERR_ENGINE, "failed to create a context: " + log_tail());
                return nullptr;
            }
            if (!invariant) {
                s->kv_mode = STRATA_KV_SHARED;
            } else if (!unified) {
                s->kv_mode = STRATA_KV_STREAMS;
            } else if (llama_set_kv_ordered(s->c, true)) {
                s->kv_mode = STRATA_KV_ORDERED;
            } else {
                llama_free(s->c);
                s->c = nullptr;
                continue;
            }
            break;
        }
        s->n_threads = n_threads;
        if (invariant) llama_set_cpu_reference(s->c, true);
        // One pool for the context's whole life. Without it ggml starts and joins threads
        // on every graph (WebAssembly: each start hands a pthread to a worker that comes back
        // only through the main thread's event loop), and under OpenMP each FFI worker thread
        // that happens to call decode would get a team of its own.
        if (n_threads > 1) {
            ggml_threadpool_params tpp = ggml_threadpool_params_default(n_threads);
            // No polling between graphs: at llama.cpp's default (50) every worker spins about
            // 200 ms after each graph, holding a core the node's JavaScript, another node or
            // another context on the same machine needs (a route of 3 and the whole model,
            // 2 threads each on 2 cores: 21 s of parity against 2.7 s). Workers sleep on the
            // pool's condition instead; one wake a graph costs an engine alone nothing seen.
            tpp.poll = 0;
            s->threadpool = ggml_threadpool_new(&tpp);
            if (!s->threadpool) {
                fail(e.slot, STRATA_ERR_ENGINE, "failed to start " + std::to_string(n_threads) + " threads");
                return nullptr;
            }
            llama_attach_threadpool(s->c, s->threadpool, s->threadpool);
        }
        return s;
    });
    if (!made && s) free_ctx(s);
    return made;
}

void strata_ctx_free(strata_ctx * ctx) {
    if (!ctx) return;
    err_slot e;
    guarded(e, 0, [&] {
        free_ctx(ctx);
        return 0;
    });
}

int32_t strata_ctx_threads(strata_ctx * ctx, int32_t n_threads) {
    if (!ctx) return STRATA_ERR_INPUT;
    const int32_t most = ctx->threadpool ? ctx->n_threads : 1;
    if (n_threads <= 0 || n_threads > most) {
        return fail(ctx->err, STRATA_ERR_INPUT, "threads: 1 to " + std::to_string(most) + " (this context's pool), not " +
                                                std::to_string(n_threads));
    }
    llama_set_n_threads(ctx->c, n_threads, n_threads);
    return 0;
}

#if defined(__linux__) && !defined(__EMSCRIPTEN__)
#include <pthread.h>
#include <sched.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
static inline void spin_pause() { _mm_pause(); }
#else
static inline void spin_pause() { std::atomic_signal_fence(std::memory_order_seq_cst); }
#endif

namespace {
std::atomic<int64_t> awake_window_ns{0};
std::atomic<int64_t> awake_until_ns{0};
// never destroyed: the spinner may be waiting on them when the process exits
std::mutex & awake_mu = *new std::mutex;
std::condition_variable & awake_cv = *new std::condition_variable;
std::once_flag awake_started;
// whether the spinner runs: it never spins at an ordinary priority
std::atomic<bool> awake_running{false};

int64_t steady_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

void awake_loop(std::promise<bool> started) {
    sched_param p{};
    p.sched_priority = 0;
    const bool idle = pthread_setschedparam(pthread_self(), SCHED_IDLE, &p) == 0;
    awake_running.store(idle);
    started.set_value(idle);
    if (!idle) return;
    // named, so that what it spins is told apart from the node's own work (/proc/<pid>/task/*/comm)
    pthread_setname_np(pthread_self(), "strata-awake");
    for (;;) {
        while (steady_ns() < awake_until_ns.load(std::memory_order_relaxed)) {
            for (int i = 0; i < 64; ++i) spin_pause();
        }
        std::unique_lock<std::mutex> lk(awake_mu);
        awake_cv.wait(lk, [] { return steady_ns() < awake_until_ns.load(); });
    }
}

// after a decode: the window starts again (the spinner sleeping since the last one wakes)
void awake_touch() {
    const int64_t window = awake_window_ns.load(std::memory_order_relaxed);
    if (window <= 0 || !awake_running.load(std::memory_order_relaxed)) return;
    const int64_t now = steady_ns();
    if (awake_until_ns.exchange(now + window) < now) {
        std::lock_guard<std::mutex> lk(awake_mu);
        awake_cv.notify_one();
    }
}
}  // namespace

int32_t strata_keep_awake(int32_t window_ms) {
    awake_window_ns.store(window_ms > 0 ? (int64_t) window_ms * 1000000 : 0);
    if (window_ms <= 0) {
        awake_until_ns.store(0);
        return 1;
    }
    std::call_once(awake_started, [] {
        std::promise<bool> started;
        std::future<bool> idle = started.get_future();
        std::thread(awake_loop, std::move(started)).detach();
        idle.wait();
    });
    awake_touch();
    return awake_running.load() ? 1 : 0;
}
#else
static void awake_touch() {}
int32_t strata_keep_awake(int32_t) { return 0; }
#endif

int32_t strata_decode(strata_ctx * ctx, int32_t n_tokens,
                      const int32_t * tokens, int32_t tokens_len,
                      const float * hidden, int32_t hidden_len,
                      const int32_t * pos, int32_t pos_len,
                      const int32_t * seq, int32_t seq_len,
                      const uint8_t * outputs, int32_t outputs_len) {
    if (!ctx) return STRATA_ERR_INPUT;
    err_slot & e = ctx->err;
    const strata_model & model = *ctx->model;
    ctx->n_outputs = 0;
    ctx->last_passes = 0;
    if (n_tokens <= 0 || n_tokens > ctx->n_batch) {
        return fail(e, STRATA_ERR_INPUT, "batch of " + std::to_string(n_tokens) + " tokens; the context takes 1 to " +
                                         std::to_string(ctx->n_batch));
    }
    const int64_t n_embd = seam_width(model.m);
    // every array is as long as the batch says, and present when its length says so
    struct arr { const char * name; const void * p; int64_t len; int64_t want; };
    const arr arrays[] = {
        { "tokens",    tokens,  tokens_len,  tokens  ? n_tokens : 0 },
        { "hidden",    hidden,  hidden_len,  hidden  ? n_tokens * n_embd : 0 },
        { "positions", pos,     pos_len,     n_tokens },
        { "sequences", seq,     seq_len,     n_tokens },
        { "outputs",   outputs, outputs_len, outputs ? n_tokens : 0 },
    };
    for (const arr & a : arrays) {
        const std::string name = std::string("decode: ") + a.name;
        if (a.len < 0) return fail(e, STRATA_ERR_INPUT, name + " has a negative length");
        if (!a.p && a.len > 0) {
            return fail(e, STRATA_ERR_INPUT, name + " is NULL with a length of " + std::to_string(a.len));
        }
        if (!a.p && a.want > 0) {
            return fail(e, STRATA_ERR_INPUT, name + " missing; a batch of " + std::to_string(n_tokens) + " needs " +
                                             std::to_string(a.want));
        }
        if (a.p && a.len != a.want) {
            return fail(e, STRATA_ERR_INPUT, name + " holds " + std::to_string(a.len) + " elements; a batch of " +
                                             std::to_string(n_tokens) + " needs " + std::to_string(a.want));
        }
    }
    if (model.first() && (!tokens || hidden)) {
        return fail(e, STRATA_ERR_INPUT, "the first layer range takes token ids, not hidden states");
    }
    if (!model.first() && (!hidden || tokens)) {
        return fail(e, STRATA_ERR_INPUT, "layer range [" + std::to_string(model.start) + ", " + std::to_string(model.end) +
                                         ") takes hidden states, not token ids");
    }
    const int32_t n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model.m));
    for (int32_t i = 0; i < n_tokens; ++i) {
        if (seq[i] < 0 || seq[i] >= ctx->n_seq_max) {
            return fail(e, STRATA_ERR_INPUT, "unknown sequence " + std::to_string(seq[i]) + " (the context holds " +
                                             std::to_string(ctx->n_seq_max) + ")");
        }
        if (pos[i] < 0) return fail(e, STRATA_ERR_INPUT, "negative position");
        if (tokens && (tokens[i] < 0 || tokens[i] >= n_vocab)) {
            return fail(e, STRATA_ERR_INPUT, "token id " + std::to_string(tokens[i]) + " outside the vocabulary");
        }
    }
    if (hidden) {
        const int64_t n = (int64_t) n_tokens * n_embd;
        for (int64_t i = 0; i < n; ++i) {
            if (!std::isfinite(hidden[i])) return fail(e, STRATA_ERR_INPUT, "hidden state holds a non-finite value");
        }
    }

    return guarded(e, STRATA_ERR_ENGINE, [&] {
        int32_t n_out = 0;
        for (int32_t i = 0; i < n_tokens; ++i) {
            ctx->seq_ptr[i] = const_cast<int32_t *>(&seq[i]);
            ctx->logits[i]  = !model.last() || (outputs && outputs[i]) ? 1 : 0;
            n_out += ctx->logits[i];
        }
        llama_batch b = {};
        b.n_tokens = n_tokens;
        b.token    = const_cast<int32_t *>(tokens);
        b.embd     = const_cast<float *>(hidden);
        b.pos      = const_cast<int32_t *>(pos);
        b.n_seq_id = ctx->n_seq_id.data();
        b.seq_id   = ctx->seq_ptr.data();
        b.logits   = ctx->logits.data();

        ctx->captured.clear();
        ctx->capture_failed = false;
        const uint64_t passes0 = llama_n_graph_passes(ctx->c);
        const int32_t r = llama_decode(ctx->c, b);
        ctx->last_passes = (int32_t) (llama_n_graph_passes(ctx->c) - passes0);
        if (r == 1) {
            int64_t stats[5] = {0};
            strata_ctx_stats(ctx, stats, 5);
            if (stats[4] < stats[0]) {
                // one stream per sequence: name the one that is full
                llama_memory_t mem = llama_get_memory(ctx->c);
                for (int32_t i = 0; i < n_tokens; ++i) {
                    const int32_t held = llama_memory_seq_pos_max(mem, seq[i]) + 1;
                    int32_t adding = 0;
                    for (int32_t k = 0; k < n_tokens; ++k) adding += seq[k] == seq[i];
                    if (held + adding > stats[4]) {
                        return fail(e, STRATA_ERR_KV_FULL, "KV budget exhausted: sequence " + std::to_string(seq[i]) +
                                                           " holds " + std::to_string(held) + " of its " +
                                                           std::to_string(stats[4]) + " cells, no room for " +
                                                           std::to_string(adding) + " more");
                    }
                }
            }
            return fail(e, STRATA_ERR_KV_FULL, "KV budget exhausted: no room for " + std::to_string(n_tokens) +
                                               " tokens in a pool of " + std::to_string(stats[0]) + " cells (" +
                                               std::to_string(stats[1]) + " in use)");
        }
        if (r == -1) return fail(e, STRATA_ERR_INPUT, "invalid batch: " + log_tail());
        if (r != 0)  return fail(e, STRATA_ERR_ENGINE, "decode failed (" + std::to_string(r) + "): " + log_tail());
        if (ctx->capture_failed) return fail(e, STRATA_ERR_ENGINE, "out of memory recording the residual stream");
#if defined(STRATA_WASM_WEBGPU)
        // every WebGPU wait happens here, so that strata_outputs never suspends (ASYNCIFY in
        // emscripten 3.1.6 cannot resume an export with an int64 parameter)
        llama_synchronize(ctx->c);
#endif
        ctx->n_outputs = n_out;
        awake_touch();
        return n_out;
    });
}

int32_t strata_ctx_last_passes(const strata_ctx * ctx) {
    if (!ctx) return STRATA_ERR_INPUT;
    return ctx->last_passes;
}

int32_t strata_output_dim(const strata_ctx * ctx) {
    if (!ctx) return STRATA_ERR_INPUT;
    return ctx->model->last() ? llama_vocab_n_tokens(llama_model_get_vocab(ctx->model->m))
                              : seam_width(ctx->model->m);
}

int64_t strata_outputs(strata_ctx * ctx, float * dst, int64_t cap) {
    if (!ctx) return STRATA_ERR_INPUT;
    if (bad_buf(dst, cap)) return fail(ctx->err, STRATA_ERR_INPUT, "outputs: NULL buffer with a nonzero capacity");
    const int64_t n = (int64_t) ctx->n_outputs * strata_output_dim(ctx);
    if (n == 0) return 0;
    if (cap < n) return fail(ctx->err, STRATA_ERR_INPUT, "output buffer holds " + std::to_string(cap) + " floats, " +
                                                         std::to_string(n) + " needed");
    return guarded(ctx->err, (int64_t) STRATA_ERR_ENGINE, [&]() -> int64_t {
        const float * src = ctx->model->last() ? llama_get_logits(ctx->c) : llama_get_embeddings(ctx->c);
        if (!src) return fail(ctx->err, STRATA_ERR_ENGINE, "no outputs: " + log_tail());
        memcpy(dst, src, n * sizeof(float));
        return n;
    });
}

int32_t strata_seq_release(strata_ctx * ctx, int32_t seq) {
    if (!ctx) return STRATA_ERR_INPUT;
    if (seq < 0 || seq >= ctx->n_seq_max) return fail(ctx->err, STRATA_ERR_INPUT, "unknown sequence " + std::to_string(seq));
    return guarded(ctx->err, STRATA_ERR_ENGINE, [&] {
        llama_memory_seq_rm(llama_get_memory(ctx->c), seq, -1, -1);
        return 0;
    });
}

int32_t strata_seq_trim(strata_ctx * ctx, int32_t seq, int32_t pos) {
    if (!ctx) return STRATA_ERR_INPUT;
    if (seq < 0 || seq >= ctx->n_seq_max) return fail(ctx->err, STRATA_ERR_INPUT, "unknown sequence " + std::to_string(seq));
    if (pos < 0) return fail(ctx->err, STRATA_ERR_INPUT, "trim to a negative position");
    return guarded(ctx->err, STRATA_ERR_ENGINE, [&] {
        if (!llama_memory_seq_rm(llama_get_memory(ctx->c), seq, pos, -1)) {
            return fail(ctx->err, STRATA_ERR_ENGINE, "this KV cache cannot forget part of a sequence");
        }
        return 0;
    });
}

int32_t strata_seq_copy(strata_ctx * ctx, int32_t src, int32_t dst, int32_t pos) {
    if (!ctx) return STRATA_ERR_INPUT;
    for (const int32_t seq : { src, dst }) {
        if (seq < 0 || seq >= ctx->n_seq_max) return fail(ctx->err, STRATA_ERR_INPUT, "unknown sequence " + std::to_string(seq));
    }
    if (src == dst || pos < 0) return fail(ctx->err, STRATA_ERR_INPUT, "a copy needs two sequences and a position >= 0");
    // across streams llama.cpp copies whole streams only (and asserts otherwise)
    if (ctx->kv_mode != STRATA_KV_ORDERED) return fail(ctx->err, STRATA_ERR_INPUT, "sequences share cells only in an ordered pool");
    return guarded(ctx->err, STRATA_ERR_ENGINE, [&] {
        llama_memory_t mem = llama_get_memory(ctx->c);
        llama_memory_seq_rm(mem, dst, -1, -1);
        llama_memory_seq_cp(mem, src, dst, 0, pos);
        return 0;
    });
}

// the checks every state call makes: a context, a sequence of it, an ordered pool
static int32_t state_refused(strata_ctx * ctx, int32_t seq) {
    if (!ctx) return STRATA_ERR_INPUT;
    if (seq < 0 || seq >= ctx->n_seq_max) return fail(ctx->err, STRATA_ERR_INPUT, "unknown sequence " + std::to_string(seq));
    // a stream's state holds the stream's layout: the ordered pool is the one layout we move
    if (ctx->kv_mode != STRATA_KV_ORDERED) return fail(ctx->err, STRATA_ERR_INPUT, "sequence state moves only from an ordered pool");
    return 0;
}

int64_t strata_seq_state_size(strata_ctx * ctx, int32_t seq) {
    if (const int32_t r = state_refused(ctx, seq)) return r;
    return guarded(ctx->err, (int64_t) STRATA_ERR_ENGINE, [&] {
        if (llama_memory_seq_pos_max(llama_get_memory(ctx->c), seq) < 0) return (int64_t) 0;
        return (int64_t) llama_state_seq_get_size(ctx->c, seq);
    });
}

int64_t strata_seq_state_get(strata_ctx * ctx, int32_t seq, uint8_t * dst, int64_t cap) {
    if (const int32_t r = state_refused(ctx, seq)) return r;
    if (bad_buf(dst, cap)) return fail(ctx->err, STRATA_ERR_INPUT, "state: NULL buffer with a nonzero capacity");
    return guarded(ctx->err, (int64_t) STRATA_ERR_ENGINE, [&] {
        const size_t need = llama_state_seq_get_size(ctx->c, seq);
        if ((int64_t) need > cap) {
            return (int64_t) fail(ctx->err, STRATA_ERR_INPUT, "state: " + std::to_string(need) + " bytes into " + std::to_string(cap));
        }
        const size_t n = llama_state_seq_get_data(ctx->c, dst, (size_t) cap, seq);
        if (n == 0) return (int64_t) fail(ctx->err, STRATA_ERR_ENGINE, "llama.cpp wrote no state");
        return (int64_t) n;
    });
}

int32_t strata_seq_state_set(strata_ctx * ctx, int32_t seq, const uint8_t * src, int64_t len) {
    if (const int32_t r = state_refused(ctx, seq)) return r;
    if (!src || len <= 0) return fail(ctx->err, STRATA_ERR_INPUT, "state: no bytes");
    return guarded(ctx->err, STRATA_ERR_ENGINE, [&] {
        llama_memory_t mem = llama_get_memory(ctx->c);
        const size_t n = llama_state_seq_set_data(ctx->c, src, (size_t) len, seq);
        if (n == 0 || n != (size_t) len) {
            // llama.cpp empties the sequence when it refuses; a short read leaves part of it
            llama_memory_seq_rm(mem, seq, -1, -1);
            return fail(ctx->err, STRATA_ERR_INPUT, n == 0 ? "llama.cpp refused the sequence state (layout, layers, widths or room)"
                                                          : "the sequence state has bytes past its end");
        }
        return (int32_t) (llama_memory_seq_pos_max(mem, seq) + 1);
    });
}

int32_t strata_seq_pos_max(strata_ctx * ctx, int32_t seq) {
    if (!ctx) return STRATA_ERR_INPUT;
    if (seq < 0 || seq >= ctx->n_seq_max) return fail(ctx->err, STRATA_ERR_INPUT, "unknown sequence " + std::to_string(seq));
    return llama_memory_seq_pos_max(llama_get_memory(ctx->c), seq);
}

int32_t strata_ctx_stats(strata_ctx * ctx, int64_t * out, int32_t cap) {
    if (!ctx) return STRATA_ERR_INPUT;
    if (bad_buf(out, cap)) return fail(ctx->err, STRATA_ERR_INPUT, "stats: NULL buffer with a nonzero capacity");
    llama_memory_t mem = llama_get_memory(ctx->c);
    int64_t used = 0;
    for (int32_t s = 0; s < ctx->n_seq_max; ++s) {
        // a sequence holds positions 0 to its highest: nothing here removes a sequence's head
        // (and deepseek4's cache reports its highest as its lowest: its compressed keys cannot
        // roll back within the window)
        const llama_pos hi = llama_memory_seq_pos_max(mem, s);
        if (hi >= 0) used += hi + 1;
    }
    const int64_t cells = llama_n_ctx(ctx->c);
    // what the cache allocated: sliding-window layers hold fewer cells, and widths differ per layer
    int64_t bytes = 0;
    for (const auto & [buft, size] : mem->memory_breakdown()) bytes += (int64_t) size;
    const int64_t per_seq = llama_n_ctx_seq(ctx->c);
    // the scheduler's compute buffers, reserved when the context was made
    int64_t compute = 0;
    for (const auto & [buft, data] : ctx->c->memory_breakdown()) compute += (int64_t) data.compute;
    const int64_t stats[] = { cells, used, bytes, ctx->n_seq_max, per_seq, (int64_t) llama_n_graph_passes(ctx->c),
                              ctx->kv_mode, compute };
    const int32_t n = std::min<int32_t>(cap, 8);
    for (int32_t i = 0; i < n; ++i) out[i] = stats[i];
    return n;
}

int32_t strata_ctx_capture(strata_ctx * ctx, const int32_t * layers, int32_t n) {
    if (!ctx) return STRATA_ERR_INPUT;
    if (bad_buf(layers, n)) return fail(ctx->err, STRATA_ERR_INPUT, "capture: NULL layers with a nonzero count");
    for (int32_t i = 0; i < n; ++i) {
        if (layers[i] < ctx->model->start || layers[i] >= ctx->model->end) {
            return fail(ctx->err, STRATA_ERR_INPUT, "capture: layer " + std::to_string(layers[i]) + " is not in [" +
                                                    std::to_string(ctx->model->start) + ", " +
                                                    std::to_string(ctx->model->end) + ")");
        }
    }
    return guarded(ctx->err, STRATA_ERR_ENGINE, [&] {
        ctx->capture_layers.assign(layers, layers + n);
        ctx->captured.clear();
        return 0;
    });
}

int64_t strata_ctx_captured(strata_ctx * ctx, int32_t il, float * dst, int64_t cap) {
    if (!ctx) return STRATA_ERR_INPUT;
    if (bad_buf(dst, cap)) return fail(ctx->err, STRATA_ERR_INPUT, "captured: NULL buffer with a nonzero capacity");
    auto it = ctx->captured.find(il);
    if (it == ctx->captured.end()) return 0;
    const int64_t n = (int64_t) it->second.size();
    if (cap < n) return fail(ctx->err, STRATA_ERR_INPUT, "capture buffer too small: " + std::to_string(n) + " floats needed");
    memcpy(dst, it->second.data(), n * sizeof(float));
    return n;
}

} // extern "C"
