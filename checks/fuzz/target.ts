// What a fuzz target is: its seeds, its structure-aware changes, and the code under test (the
// targets themselves are listed in targets.ts).
/** The code under test, one input at a time; a target that starts a process says how to end
 *  it (close) and how much memory it took (peakRssMb). */
export type FuzzRun = ((input: Uint8Array) => unknown) & {
  close?(): Promise<void> | void;
  peakRssMb?(): number;
};

export interface FuzzTarget {
  readonly name: string;
  /** the inputs are protobuf: varints are changed too */
  readonly proto: boolean;
  /** the code runs in a sanitizer build of the engine (gguf-load: AddressSanitizer) */
  readonly sanitizer?: "address";
  /** work done once before any clock starts (the sanitizer build, on first use) */
  prepare?(): Promise<void>;
  /** a change that knows the input's structure (half of the inputs), beside the byte-level ones */
  change?(seed: Uint8Array, next: () => number): Uint8Array;
  /**
   * makes a changed input's checksums right again (half of the inputs), so the changes reach
   * the checks behind them; the input as it is when it does not parse
   */
  fixup?(input: Uint8Array): Uint8Array;
  seeds(): Promise<Uint8Array[]>;
  /** A fresh instance of the code under test (state kept between inputs, e.g. a tracker). */
  start(): Promise<FuzzRun>;
}
