// Reply links on the last shard: a Route Session's owner may open its own stream to the shard
// that samples, and then its step replies go there straight (one crossing) instead of back up
// the route. One link per session, the newest epoch's.
import type { SeamFrame } from "../gen/strata/seam/v1/seam_pb.ts";
import { SeamError } from "../seam/errors.ts";
import type { SeamTransport } from "../seam/link.ts";
import type { NodeSession } from "./node-session.ts";

/** A route session owner's reply link to this (last) shard. */
export interface OwnerLink {
  readonly sessionId: string;
  readonly epoch: bigint;
  readonly send: (f: SeamFrame) => void;
  readonly transport: SeamTransport;
}

export class OwnerLinks {
  readonly #links = new Map<string, OwnerLink>();

  /** A checked reply link's OPEN (ticket and all): it takes the session's replies from now on,
   *  unless one of a newer epoch holds them. */
  attach(f: SeamFrame, send: (f: SeamFrame) => void, transport: SeamTransport): OwnerLink {
    const held = this.#links.get(f.sessionId);
    if (held && held.epoch > f.routeEpoch) {
      throw new SeamError("wrong_epoch", `session ${f.sessionId} is owned at epoch ${held.epoch}`);
    }
    const owner = { sessionId: f.sessionId, epoch: f.routeEpoch, send, transport };
    this.#links.set(f.sessionId, owner);
    return owner;
  }

  /** A reply link ended: unless a newer one took its place, replies go up the route again. */
  detach(owner: OwnerLink): void {
    if (this.#links.get(owner.sessionId) === owner) this.#links.delete(owner.sessionId);
  }

  /** Where the session's step replies go: its owner's reply link, else back up the route. */
  of(s: NodeSession): OwnerLink | undefined {
    const o = this.#links.get(s.id);
    return o && o.epoch === s.epoch ? o : undefined;
  }
}
