// Run by gguf-asan.test.ts under Deno: the `gguf-load` fuzz target for a few hundred seeded
// inputs (kept regressions first) in the AddressSanitizer build of the engine library, then the
// planted-bug variant, whose every accepted load is followed by an overflow inside the library
// that ASan must report. Prints one JSON object: both reports.
import { fuzzTarget } from "../../checks/fuzz/fuzz.ts";
import { ggufLoad, ggufLoadTarget } from "../../checks/fuzz/gguf-load.ts";
import { regressionsOf } from "../../checks/fuzz/regressions.ts";

const inputs = Number(Deno.env.get("GGUF_ASAN_INPUTS") ?? 300);
const regressions = regressionsOf("gguf-load");
const fuzzed = await fuzzTarget(ggufLoad, { seed: 7, inputs, regressions });
const planted = await fuzzTarget(ggufLoadTarget({ plant: true }), { seed: 7, inputs: 12 });
console.log(JSON.stringify({ regressions: regressions.length, fuzzed, planted }));
