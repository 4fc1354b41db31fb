// A deliberately wrong engine, for proving that admission refuses a node whose outputs
// disagree (`strata node --inject-fault scale`). Never used otherwise.
import type { DecodeBatch, DecodeOutputs, RangeEngine } from "../../src/engine/range-engine.ts";

/**
 * Scales every output by 1.05 while `lying()`: close enough to look plausible, far outside
 * any tolerance (a node may pass its admission probe honestly and lie afterwards).
 */
export function scaledOutputs(engine: RangeEngine, lying: () => boolean = () => true): RangeEngine {
  return new Proxy(engine, {
    get(target, prop, receiver) {
      if (prop === "decode") {
        return async (batch: DecodeBatch): Promise<DecodeOutputs> => {
          const out = await target.decode(batch);
          if (!lying()) return out;
          return { ...out, data: out.data.map((v) => v * 1.05) };
        };
      }
      const v = Reflect.get(target, prop, receiver);
      return typeof v === "function" ? v.bind(target) : v;
    },
  });
}
