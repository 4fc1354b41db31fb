// The shared secret nodes present to register, renew and leave.
import { TrackerError } from "../errors.ts";

/** Throws unless `given` is the node token; compares in constant time (no timing oracle). */
export function checkNodeToken(given: string, expected: string): void {
  const x = new TextEncoder().encode(given);
  const y = new TextEncoder().encode(expected);
  let d = x.length ^ y.length;
  for (let i = 0; i < Math.max(x.length, y.length); i++) d |= (x[i] ?? 0) ^ (y[i] ?? 0);
  if (d !== 0) throw new TrackerError("unauthenticated", "node token refused");
}
