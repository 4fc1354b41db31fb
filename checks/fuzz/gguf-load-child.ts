// The `gguf-load` target's engine side (see gguf-load.ts): a Deno process started with the
// AddressSanitizer runtime preloaded, which opens the sanitizer build of libstrata.so through
// FFI and loads one file per request (after reading its architecture from the header, the C
// API's other reader of a GGUF file). `gguf-load-child.ts <library>`; reads one JSON request a
// line on stdin ({path, start, end, vocabOnly, plant?}) and answers one JSON line on stdout:
// {ok: true} when the load succeeded (the model was then used a little and freed), {ok: false,
// error} when the C API refused it, each with this process's peak RSS. An ASan report ends the
// process (exit 86) with the report on stderr, which the parent reads.
import { cstr, ErrorBuffer, openStrata } from "../../server/engine/native/ffi.ts";

export interface LoadRequest {
  readonly path: string;
  readonly start: number;
  readonly end: number;
  readonly vocabOnly: number;
  /** the planted bug (tests only): a facts buffer shorter than the capacity it is passed with */
  readonly plant?: boolean;
}

export interface LoadReply {
  readonly ok: boolean;
  readonly error?: string;
  readonly rssMb: number;
}

const lib = openStrata(Deno.args[0]);

function peakRssMb(): number {
  const m = Deno.readTextFileSync("/proc/self/status").match(/VmHWM:\s+(\d+) kB/);
  return m ? Math.round(Number(m[1]) / 1024) : 0;
}

const PROMPT = new TextEncoder().encode("Hello, world! <|im_start|>user\n1 2 3 ünïcödé 🙂");

/** What a node does with a model once loaded, in little: its facts, the tokenizer both ways,
 *  the chat template. Outcomes do not matter here; memory errors on the way do. */
function use(model: Deno.PointerObject, plant: boolean) {
  const facts = new BigInt64Array(10);
  lib.strata_model_facts(model, facts, facts.length);
  if (plant) {
    // the planted bug: a caller lying about its buffer, so the library's own (instrumented)
    // stores run past a 2-element array; ASan must report a heap-buffer-overflow WRITE here
    lib.strata_model_facts(model, new BigInt64Array(2), 10);
  }
  const tokens = new Int32Array(256);
  const n = lib.strata_tokenize(model, PROMPT, PROMPT.length, 1, 1, tokens, tokens.length);
  const piece = new Uint8Array(64);
  for (let i = 0; i < Math.min(n, tokens.length); i++) {
    lib.strata_token_piece(model, tokens[i], piece, piece.length);
  }
  // every id the vocabulary claims, a few past it, and some negative ones
  const nVocab = Number(facts[2]);
  for (let t = -2; t < Math.min(nVocab + 2, 4096); t++) lib.strata_token_piece(model, t, piece, piece.length);
  lib.strata_token_is_eog(model, nVocab - 1);
  lib.strata_special_tokens(model, new Int32Array(16), 16);
  lib.strata_chat_template(model, new Uint8Array(1024), 1024);
  lib.strata_model_arch(model, new Uint8Array(64), 64);
}

async function handle(req: LoadRequest): Promise<LoadReply> {
  const err = new ErrorBuffer();
  // the C API's other reader of a GGUF file: the header alone (its outcome does not matter)
  lib.strata_file_arch(cstr(req.path), new Uint8Array(64), 64, err.buf, err.cap);
  const model = await lib.strata_model_load(
    cstr(req.path),
    req.start,
    req.end,
    0,
    req.vocabOnly,
    err.buf,
    err.cap,
  );
  if (!model) return { ok: false, error: err.message, rssMb: peakRssMb() };
  try {
    use(model, req.plant === true);
  } finally {
    lib.strata_model_free(model);
  }
  return { ok: true, rssMb: peakRssMb() };
}

// ready once the library is open and the backends registered
lib.strata_backends(new Uint8Array(64), 64);
const out = (line: unknown) => Deno.stdout.writeSync(new TextEncoder().encode(JSON.stringify(line) + "\n"));
out({ ready: true });

let buffered = "";
for await (const chunk of Deno.stdin.readable.pipeThrough(new TextDecoderStream())) {
  buffered += chunk;
  for (let i = buffered.indexOf("\n"); i >= 0; i = buffered.indexOf("\n")) {
    const line = buffered.slice(0, i);
    buffered = buffered.slice(i + 1);
    if (line.trim()) out(await handle(JSON.parse(line)));
  }
}
