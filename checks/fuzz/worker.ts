// One target fuzzed in a process of its own (so a crash or a runaway allocation takes down
// only this run): `worker.ts <target> <seconds> <seed>`; prints its report as one JSON line.
import { fuzzTarget } from "./fuzz.ts";
import { regressionsOf } from "./regressions.ts";
import { TARGETS } from "./targets.ts";

const [name, seconds, seed] = Deno.args;
const target = TARGETS.find((t) => t.name === name);
if (!target) throw new Error(`no fuzz target ${name}`);
const report = await fuzzTarget(target, {
  seed: Number(seed),
  seconds: Number(seconds),
  regressions: regressionsOf(name),
});
console.log(JSON.stringify(report));
