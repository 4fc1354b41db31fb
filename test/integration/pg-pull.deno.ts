// What a tracker replica pulls from PostgreSQL (server/tracker/pg-store.ts), on a real server
// started here: every row another replica wrote, once; none of its own heartbeats; and a
// write whose transaction commits after a later one's is still read at the next pull.
// Prints one JSON object; pg-pull.test.ts asserts on it.
import postgres from "postgres";
import { startPostgres } from "../../server/toolchain/postgres.ts";
import { PgTrackerStore } from "../../server/tracker/pg-store.ts";

const pg = await startPostgres();
const raw = postgres(pg.url, { max: 1, onnotice: () => {} });
const beat = (node: string, at: number) => ({ node, at, sessions: 0, sessionIds: [] });
const names = (c: { beats: { node: string }[] }) => c.beats.map((b) => b.node).sort();
try {
  const a = await PgTrackerStore.open(pg.url);
  const b = await PgTrackerStore.open(pg.url);
  a.saveBeat(beat("n1", 1));
  a.saveBeat(beat("n2", 1));
  await a.flushBeats();
  // a first pull reads everything
  const firstOnB = names(await b.pull());
  const firstOnA = names(await a.pull());
  // then only what changed, and on A not its own beats
  a.saveBeat(beat("n3", 2));
  await a.flushBeats();
  const nextOnA = names(await a.pull());
  const nextOnB = names(await b.pull());
  // a transaction that wrote first and commits last: under way at B's pull, read at the next
  const slow = await raw.reserve();
  await slow`begin`;
  await slow`insert into strata_leases (node, last_beat, sessions, session_ids) values ('late', 3, 0, '[]')`;
  a.saveBeat(beat("early", 4));
  await a.flushBeats();
  const whileOpen = names(await b.pull());
  await slow`commit`;
  slow.release();
  const afterCommit = names(await b.pull());
  // nothing written since: nothing read
  const quiet = names(await b.pull());
  await a.close();
  await b.close();
  console.log(JSON.stringify({ firstOnB, firstOnA, nextOnA, nextOnB, whileOpen, afterCommit, quiet }));
} finally {
  await raw.end({ timeout: 1 });
  await pg.stop();
}
