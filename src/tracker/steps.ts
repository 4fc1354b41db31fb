// Long passes of the tracker (a placement plan, the route pool) written as generators that
// yield now and then. Run at once they behave as plain functions; run in slices they give way
// to the calls between slices: a plan over 10,000 nodes took 15-50 ms, and a plan weighed
// from scratch 700 ms, during which a tracker answered nothing (docs/benchmarks.md).

/** A pass that yields between pieces of its work and returns `T` at the end. */
export type Steps<T> = Generator<void, T, void>;

/** Runs a pass to its end at once. */
export function runAll<T>(steps: Steps<T>): T {
  for (;;) {
    const r = steps.next();
    if (r.done) return r.value;
  }
}

/** Lets other work run, then calls `resume` (a timer, where there is an event loop). */
export type GiveWay = (resume: () => void) => void;

/** Runs passes in slices of at most `sliceMs` (checked where they yield). */
export type Slicer = <T>(
  steps: Steps<T>,
  done: (value: T, busyMs: number) => void,
  failed: (error: unknown) => void,
) => void;

/** What a slice of work may take before the pass gives way. */
export const SLICE_MS = 4;

export function slicer(giveWay: GiveWay, sliceMs = SLICE_MS): Slicer {
  return <T>(steps: Steps<T>, done: (value: T, busyMs: number) => void, failed: (e: unknown) => void) => {
    let busy = 0;
    const slice = () => {
      const started = performance.now();
      try {
        for (;;) {
          const r = steps.next();
          if (r.done) {
            busy += performance.now() - started;
            done(r.value, busy);
            return;
          }
          if (performance.now() - started >= sliceMs) break;
        }
      } catch (e) {
        failed(e);
        return;
      }
      busy += performance.now() - started;
      giveWay(slice);
    };
    slice();
  };
}

/** Yields every `every`-th time it is called: a cheap check inside a loop. */
export function counter(every = 256): () => boolean {
  let n = 0;
  return () => ++n % every === 0;
}
