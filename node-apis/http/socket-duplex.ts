// A node:net socket as the fast seam's ByteDuplex (Node, and Deno where a node:net socket is
// what there is).
import type { Buffer } from "node:buffer";
import type * as net from "node:net";
import type { ByteDuplex } from "../../src/seam/mux.ts";

/** A socket as the fast seam sees it: Nagle off, a turn's messages written as one. */
export function socketDuplex(s: net.Socket): ByteDuplex {
  s.setNoDelay(true);
  let closed = false;
  const closers: ((why: string) => void)[] = [];
  const end = (why: string) => {
    if (closed) return;
    closed = true;
    for (const c of closers) c(why);
  };
  s.on("error", (e: Error) => end(e.message));
  s.on("close", () => end("connection closed"));
  // a turn's frames (a batch's steps, a cohort's next tokens) leave in one write, so the
  // next node takes them in one batch instead of the first one alone
  let corked = false;
  return {
    write(parts) {
      if (closed || s.destroyed) return;
      if (!corked) {
        corked = true;
        s.cork();
        queueMicrotask(() => {
          corked = false;
          s.uncork();
        });
      }
      for (const p of parts) s.write(p);
    },
    onData: (h) => s.on("data", (b: Buffer) => h(b)),
    onClose: (h) => closers.push(h),
    close: () => s.destroy(),
    pause: () => void s.pause(),
    resume: () => void s.resume(),
  };
}
