// How a child process ended, in words: a signal by its name and meaning (exit 132 is
// SIGILL, not a number to look up), with its last lines of output.

const MEANING: Record<string, string> = {
  SIGILL: "illegal instruction: the CPU refused an instruction the engine was built with",
  SIGSEGV: "segmentation fault",
  SIGBUS: "bus error",
  SIGFPE: "arithmetic exception",
  SIGABRT: "aborted",
  SIGKILL: "killed (out of memory, or by another process)",
  SIGTERM: "terminated",
};

/** "SIGILL (illegal instruction: …)" */
export function signalName(signal: Deno.Signal | string): string {
  const meaning = MEANING[signal];
  return meaning ? `${signal} (${meaning})` : String(signal);
}

/** Exit codes 128 + n of a shell wrapper name the signal n as well. */
const BY_NUMBER: Record<number, string> = {
  4: "SIGILL",
  6: "SIGABRT",
  7: "SIGBUS",
  8: "SIGFPE",
  9: "SIGKILL",
  11: "SIGSEGV",
  15: "SIGTERM",
};

/** "exit 1", or "SIGSEGV (segmentation fault)" for a child a signal ended. */
export function describeExit(status: Deno.CommandStatus): string {
  if (status.signal) return signalName(status.signal);
  const sig = status.code > 128 ? BY_NUMBER[status.code - 128] : undefined;
  return sig ? `exit ${status.code}, ${signalName(sig)}` : `exit ${status.code}`;
}

/** The last lines of a child's output, kept while they are passed on. */
export class OutputTail {
  readonly #lines: string[] = [];
  #partial = "";
  constructor(private readonly keep = 20) {}

  push(chunk: string): void {
    const parts = (this.#partial + chunk).split("\n");
    this.#partial = parts.pop() ?? "";
    for (const l of parts) {
      this.#lines.push(l);
      if (this.#lines.length > this.keep) this.#lines.shift();
    }
  }

  lines(): string[] {
    return this.#partial ? [...this.#lines, this.#partial].slice(-this.keep) : [...this.#lines];
  }
}
