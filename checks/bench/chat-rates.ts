// Decode rates of chats streamed from a gateway, on the driver's clock, the same way for every
// lane: tokens after a session's first (its prompt's), over the time from that first token to
// its last. Many sessions: their tokens after the first over the time any of them was decoding.

/** One chat's decode tok/s from its tokens' arrival times (ms). */
export function chatDecodeTps(at: readonly number[]): number {
  if (at.length < 2) return 0;
  return (at.length - 1) / ((at[at.length - 1] - at[0]) / 1000);
}

/**
 * Chats at once: every chat's tokens after its first, over the union of the spans from each
 * chat's first token to its last (a chat still in its prompt, or waiting for admission while
 * none decodes, adds no time).
 */
export function decodeTpsTogether(chats: readonly { readonly at: readonly number[] }[]): number {
  const spans = chats.filter((c) => c.at.length >= 2).map((c) => [c.at[0], c.at[c.at.length - 1]])
    .sort((a, b) => a[0] - b[0]);
  let ms = 0, end = -Infinity;
  for (const [a, b] of spans) {
    if (b <= end) continue;
    ms += b - Math.max(a, end);
    end = b;
  }
  const tokens = chats.reduce((n, c) => n + Math.max(0, c.at.length - 1), 0);
  return ms > 0 ? tokens / (ms / 1000) : 0;
}

/** `count` jobs, at most `admit` at once: the next starts as one ends (the results in job order). */
export async function admitted<T>(
  count: number,
  admit: number,
  job: (i: number) => Promise<T>,
): Promise<T[]> {
  const out: T[] = new Array(count);
  let next = 0;
  const worker = async () => {
    while (next < count) {
      const i = next++;
      out[i] = await job(i);
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(admit, count)) }, worker));
  return out;
}
