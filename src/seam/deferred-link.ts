// A link whose transport is still being chosen (the first stream to a node waits for the
// fast seam's answer): frames queue until the link is known, then go out on it in order.
import type { SeamFrame } from "../gen/strata/seam/v1/seam_pb.ts";
import type { SeamLink, SeamTransport } from "./link.ts";

export function deferredLink(chosen: Promise<SeamLink>, fallback: SeamTransport): SeamLink {
  let link: SeamLink | undefined;
  const queued: SeamFrame[] = [];
  let ended: { abort?: string } | undefined;
  const ready = chosen.then((l) => {
    link = l;
    for (const f of queued.splice(0)) l.send(f);
    if (ended?.abort !== undefined) l.abort(ended.abort);
    else if (ended) l.close();
    return l;
  });
  ready.catch(() => {}); // the replies say it
  async function* replies() {
    yield* (await ready).replies;
  }
  return {
    get transport() {
      return link?.transport ?? fallback;
    },
    send(f) {
      if (ended) return false;
      if (link) return link.send(f);
      queued.push(f);
      return true;
    },
    replies: replies(),
    close() {
      ended ??= {};
      link?.close();
    },
    abort(reason) {
      ended = { abort: reason };
      link?.abort(reason);
    },
  };
}
