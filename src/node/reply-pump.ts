// The replies of the next shard, passed back up a session's route: OPEN's answers with this
// shard's positions added, step replies where the owner has no reply link, the end of a release
// or cancel. A route lost further down parks the session here for a repair.
import { Phase } from "../gen/strata/seam/v1/seam_pb.ts";
import type { NodeSession } from "./node-session.ts";
import { catchUp, type RebuildSender, settleRebuild } from "./rebuild.ts";
import { errorText, sessionFailure } from "./replies.ts";
import type { SessionTable } from "./session-table.ts";

/** Passes the next shard's replies back up (step replies too, where the owner has no reply link). */
export async function pumpReplies(
  s: NodeSession,
  url: string,
  table: SessionTable,
  by: RebuildSender,
): Promise<void> {
  const link = s.downstream!;
  try {
    for await (const r of link.replies) {
      if (r.rebuild) {
        settleRebuild(s, r);
        continue;
      }
      if (r.phase === Phase.OPEN && s.open.prefix && !s.open.resume && !r.status) {
        r.hopPositions.push(s.nextPos);
        s.answer(r);
        continue;
      }
      if (r.phase === Phase.OPEN && s.open.resume && !r.status) {
        // the OPEN goes back up once the next shard holds what this one does (rebuilt if it joined)
        void catchUp(s, r, by).then(() => {
          r.hopPositions.push(s.nextPos);
          r.hopReused.push(s.fromEntry);
          s.answer(r);
        });
        continue;
      }
      // a step's reply climbing back (no reply link): one more crossing
      if (r.crossings > 0) r.crossings++;
      if (r.stepId === 0n && r.status) {
        // the rest of the route lost the session: this shard keeps its part for a repair
        s.reply(r);
        await table.park(s, r.status.message);
        return;
      }
      s.answer(r);
      if (s.ending && (r.phase === Phase.RELEASE || r.phase === Phase.CANCEL)) {
        s.closed = true;
        link.close();
        return;
      }
    }
    throw new Error("it ended the stream");
  } catch (e) {
    if (s.closed) return;
    if (s.ending) {
      s.closed = true;
      return;
    }
    s.reply(sessionFailure(s.identity, "unavailable", `next shard ${url}: ${errorText(e)}`));
    await table.park(s, "next shard gone");
  }
}
