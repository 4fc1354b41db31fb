// Run by crash-reports.test.ts under Deno. A deliberately broken engine library — every
// symbol of the C API (those not written here as stubs that answer 0), but its decode executes
// an instruction the CPU refuses (ud2, as an AMX tile op on an unconfigured tile does) — must
// (1) fail the build's smoke check with the signal's name and leave nothing in the cache, and
// (2) make `strata up` say which service died, of what, and with its last lines. Prints one
// JSON object.
import { existsSync } from "node:fs";
import { synthModel } from "../../src/model/synth.ts";
import { installChecked } from "../../server/build/native.ts";
import { SmokeCheckFailed } from "../../server/build/smoke-check.ts";
import { SYMBOLS } from "../../server/engine/native/ffi.ts";

const dir = Deno.makeTempDirSync({ prefix: "strata-crash-" });
const cache = `${dir}/cache`;
const source = `${dir}/broken.c`;
const lib = `${dir}/libbroken.so`;
// the facts a synthetic 2-layer llama would report: n_layer, n_embd, n_vocab, n_ctx_train,
// start, end, n_head, n_head_kv, weight bytes, n_expert
Deno.writeTextFileSync(
  source,
  `#include <stdint.h>
#include <string.h>
static char handle[64];
static int32_t copy(const char * s, char * buf, int32_t cap) {
  int32_t n = (int32_t) strlen(s);
  if (buf && cap > 0) { int32_t k = n < cap - 1 ? n : cap - 1; memcpy(buf, s, k); buf[k] = 0; }
  return n;
}
int32_t strata_model_error(void * m, char * b, int32_t c) { return copy("", b, c); }
int32_t strata_ctx_error(void * x, char * b, int32_t c) { return copy("", b, c); }
void strata_log_level(int32_t l) {}
int32_t strata_backends(char * b, int32_t c) { return copy("CPU", b, c); }
int32_t strata_file_arch(const char * p, char * b, int32_t c, char * e, int32_t ec) { return copy("llama", b, c); }
void * strata_model_load(const char * p, int32_t s, int32_t e, int32_t g, int32_t v, char * eb, int32_t ec) { return handle; }
void strata_model_free(void * m) {}
int32_t strata_model_facts(void * m, int64_t * out, int32_t cap) {
  const int64_t f[10] = { 2, 128, 384, 512, 0, 2, 4, 2, 1000, 0 };
  for (int i = 0; i < cap && i < 10; i++) out[i] = f[i];
  return cap < 10 ? cap : 10;
}
int32_t strata_model_arch(void * m, char * b, int32_t c) { return copy("llama", b, c); }
int32_t strata_tokenize(void * m, const char * t, int32_t l, int32_t a, int32_t p, int32_t * o, int32_t c) { return 0; }
int32_t strata_token_piece(void * m, int32_t t, char * b, int32_t c) { return copy("x", b, c); }
int32_t strata_token_is_eog(void * m, int32_t t) { return 0; }
int32_t strata_special_tokens(void * m, int32_t * o, int32_t c) { for (int i = 0; i < c && i < 3; i++) o[i] = i; return 3; }
int32_t strata_chat_template(void * m, char * b, int32_t c) { return -1; }
int32_t strata_chat_apply(const char * t, const char * m, int32_t ml, int32_t n, int32_t a, char * b, int32_t c, char * e, int32_t ec) { return -1; }
void * strata_ctx_new(void * m, int32_t n, int32_t s, int32_t b, int32_t t, int32_t c, char * e, int32_t ec) { return handle + 8; }
void strata_ctx_free(void * x) {}
int32_t strata_ctx_threads(void * x, int32_t n) { return 0; }
int32_t strata_decode(void * x, int32_t n, const int32_t * t, int64_t tl, const float * h, int64_t hl,
                      const int32_t * p, int64_t pl, const int32_t * s, int64_t sl, const uint8_t * o, int64_t ol) {
  __builtin_trap(); /* ud2: SIGILL */
  return 0;
}
int32_t strata_ctx_last_passes(void * x) { return 1; }
int32_t strata_output_dim(void * x) { return 384; }
int64_t strata_outputs(void * x, float * d, int64_t c) { return 0; }
int32_t strata_seq_release(void * x, int32_t s) { return 0; }
int32_t strata_seq_trim(void * x, int32_t s, int32_t p) { return 0; }
int32_t strata_seq_pos_max(void * x, int32_t s) { return -1; }
int32_t strata_ctx_stats(void * x, int64_t * o, int32_t c) { for (int i = 0; i < c && i < 4; i++) o[i] = 0; return 4; }
int32_t strata_ctx_capture(void * x, const int32_t * l, int32_t n) { return 0; }
int64_t strata_ctx_captured(void * x, int32_t il, float * d, int64_t c) { return 0; }
void * strata_grammar_new(void * m, const char * t, int32_t l, const char * p, int32_t pl, int32_t np,
                          const int32_t * k, int32_t nk, char * e, int32_t ec) { return 0; }
void strata_grammar_free(void * g) {}
int32_t strata_grammar_error(void * g, char * b, int32_t c) { return copy("", b, c); }
int32_t strata_grammar_apply(void * g, float * l, int32_t n) { return -1; }
int32_t strata_grammar_accept(void * g, int32_t t) { return -1; }
`,
);
// every other symbol the FFI binding opens, as a stub that answers 0: a new call in the C API
// needs no edit here (the library must open before it can crash)
const written = new Set([...Deno.readTextFileSync(source).matchAll(/\b(strata_\w+)\(/g)].map((m) => m[1]));
Deno.writeTextFileSync(
  source,
  Object.keys(SYMBOLS).filter((s) => !written.has(s)).map((s) => `long long ${s}() { return 0; }\n`).join(""),
  { append: true },
);
const cc = await new Deno.Command("cc", { args: ["-shared", "-fPIC", "-O1", "-o", lib, source] }).output();
if (!cc.success) throw new Error(new TextDecoder().decode(cc.stderr));

const out: Record<string, unknown> = {};
// 1. the build's gate: the smoke check runs it, it dies, nothing lands in the cache
Deno.env.set("STRATA_CACHE", cache);
const target = `${cache}/native/cpu-broken/libstrata.so`;
try {
  await installChecked(lib, target, { backend: "cpu", key: "broken" });
  out.smoke = "passed (unexpected)";
} catch (e) {
  out.smoke = e instanceof SmokeCheckFailed ? e.message : `other: ${e}`;
}
out.cached = existsSync(`${cache}/native/cpu-broken`);
out.staging_left = [...(existsSync(`${cache}/native`) ? Deno.readDirSync(`${cache}/native`) : [])].map((e) =>
  e.name
);

// 2. a service that dies says why: strata up with that library in every process
const model = `${dir}/synth.gguf`;
Deno.writeFileSync(model, synthModel({ arch: "llama", seed: 2, nLayer: 2, nEmbd: 128, nFf: 256 }));
const up = await new Deno.Command(new URL("../../strata", import.meta.url).pathname, {
  args: ["up", "--model", model, "--split", "0:1,1:2", "--port", "0"],
  env: { STRATA_NATIVE_LIB: lib, STRATA_CACHE: cache },
  stdin: "null",
  stdout: "piped",
  stderr: "piped",
}).output();
out.up_code = up.code;
out.up_stderr = new TextDecoder().decode(up.stderr).split("\n").slice(-12).join("\n");
Deno.removeSync(dir, { recursive: true });
console.log(JSON.stringify(out));
