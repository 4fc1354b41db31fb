// Why this page cannot host a shard, in words, before it asks the network for one: what the
// browser gives it decides that (a secure context for storage and WebGPU, cross-origin
// isolation for the engine's threads, WebAssembly, and memory).

export interface PageAbilities {
  readonly secureContext: boolean;
  readonly crossOriginIsolated: boolean;
  readonly webAssembly: boolean;
  /** navigator.deviceMemory (GiB, rounded by the browser), where it says */
  readonly deviceMemoryGiB?: number;
  /** what the smallest shard would take, bytes */
  readonly needBytes?: number;
}

/** The reasons this page cannot run, each a sentence for a person; empty when it can. */
export function cannotRun(a: PageAbilities): string[] {
  const why: string[] = [];
  if (!a.secureContext) {
    why.push(
      "This page is not a secure context (it was not loaded over HTTPS): the browser withholds the storage and " +
        "the GPU a shard needs. Open it at its https:// address.",
    );
  }
  if (!a.crossOriginIsolated) {
    why.push(
      "This page is not cross-origin isolated, so the engine cannot run threads (SharedArrayBuffer). The " +
        "gateway sends the headers that allow it; a proxy in between may have dropped them.",
    );
  }
  if (!a.webAssembly) why.push("This browser runs no WebAssembly.");
  if (
    a.deviceMemoryGiB !== undefined && a.needBytes !== undefined && a.deviceMemoryGiB * 2 ** 30 < a.needBytes
  ) {
    why.push(
      `This device reports ${a.deviceMemoryGiB} GiB of memory; the smallest shard needs ${
        (a.needBytes / 2 ** 30).toFixed(1)
      } GiB.`,
    );
  }
  return why;
}

/** What this page's browser gives it. */
export function pageAbilities(): PageAbilities {
  const nav = navigator as Navigator & { deviceMemory?: number };
  return {
    secureContext: globalThis.isSecureContext,
    crossOriginIsolated: globalThis.crossOriginIsolated,
    webAssembly: typeof WebAssembly === "object",
    deviceMemoryGiB: nav.deviceMemory,
  };
}
