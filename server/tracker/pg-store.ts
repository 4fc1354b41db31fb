// The tracker's storage port on PostgreSQL, shared by any number of tracker replicas: the
// route key, every registration with its verdict, heartbeats, the route epoch counter, the
// nodes' asks for a range and the plan of the replica that leads placement.
// A replica keeps all of it in memory and answers from there (a route request never waits on
// the database): its own writes go out in order behind the answer, heartbeats in one batched
// statement per flush, and `pull` brings in what the other replicas wrote since the last pull.
// Each row names the transaction that last wrote it (`written_by`); a pull reads, in one
// snapshot, the rows written by transactions that were not over at the last pull's snapshot:
// nothing is missed (a write that commits after a later one is still read), and little is
// read twice. (Reading back a fixed 2 s of rows at every 1 s pull read each heartbeat three
// times: at 10,000 nodes, 6,000 rows a second per replica, whose garbage made the replicas'
// collector pauses the slowest answers of all, docs/benchmarks.md.)
import postgres from "postgres";
import { fromBinary, toBinary } from "@bufbuild/protobuf";
import { type PlaceRequest, PlaceRequestSchema } from "../../src/gen/strata/tracker/v1/tracker_pb.ts";
import { parseAdmission } from "../../src/tracker/admission.ts";
import type { Beat, NodeRecord, PlanEntry, TrackerStorage } from "../../src/tracker/storage.ts";
import { log } from "../log/log.ts";

/** What the other replicas wrote since the last pull. */
export interface Changes {
  readonly records: NodeRecord[];
  readonly gone: string[];
  readonly beats: Beat[];
}

/** Asks for a range and lines of the leader's plan, written since the last look. */
export interface PlacementChanges {
  readonly asks: { req: PlaceRequest; at: number }[];
  readonly plan: PlanEntry[];
}

/** The tables whose changes replicas pull. */
const PULLED = ["strata_nodes", "strata_leases", "strata_asks", "strata_plan"] as const;

const SCHEMA = `
  create table if not exists strata_meta (key text primary key, value text not null);
  create table if not exists strata_nodes (node text primary key, record text not null, deleted boolean not null);
  create table if not exists strata_leases (
    node text primary key, last_beat bigint not null, sessions integer not null, session_ids text not null
  );
  create table if not exists strata_epochs (id integer primary key, next bigint not null);
  create table if not exists strata_asks (node text primary key, ask bytea not null, at bigint not null);
  create table if not exists strata_plan (
    node text primary key, start_layer integer not null, end_layer integer not null, asked_at bigint not null
  );
  ${
  PULLED.map((t) => `
    alter table ${t} add column if not exists written_by xid8 not null default pg_current_xact_id();
    create index if not exists ${t}_written on ${t} (written_by);`).join("")
}
  alter table strata_leases add column if not exists beat_from text not null default '';
`;

/** The advisory lock the replica that leads placement holds (on a connection of its own: the
 *  lock goes when the replica or its connection does). */
const PLACER_LOCK = 7601;
/** Told when an ask or a plan change was written: the replicas look at once. */
const PLACE_CHANNEL = "strata_place";

export class PgTrackerStore implements TrackerStorage {
  readonly #sql: postgres.Sql;
  readonly #meta = new Map<string, string>();
  readonly #nodes = new Map<string, NodeRecord>();
  #writes: Promise<void> = Promise.resolve();
  #beats = new Map<string, Beat>();
  /** the oldest transaction not over at the last pull's snapshot (undefined: read everything) */
  #pulledFrom: string | undefined;
  #placePulledFrom: string | undefined;
  /** the connection holding the placement lock, while this replica leads */
  #leadConn: postgres.ReservedSql | undefined;
  /** statements and rows written, for the bench */
  readonly written = { statements: 0, rows: 0 };
  /** this replica, on the lease rows whose beat it wrote: it does not read its own back */
  readonly #self = crypto.randomUUID();

  private constructor(sql: postgres.Sql) {
    this.#sql = sql;
  }

  /** Connects, makes the tables (one replica at a time) and reads everything in. */
  static async open(url: string): Promise<PgTrackerStore> {
    const sql = postgres(url, { max: 4, onnotice: () => {}, idle_timeout: 0 });
    const store = new PgTrackerStore(sql);
    try {
      await sql.begin(async (tx) => {
        // replicas starting together would race on create table
        await tx`select pg_advisory_xact_lock(7600)`;
        await tx.unsafe(SCHEMA);
        await tx`insert into strata_epochs (id, next) values (1, ${String(BigInt(Date.now()) * 1000n)})
                 on conflict (id) do nothing`;
      });
      for (const r of await sql`select key, value from strata_meta`) store.#meta.set(r.key, r.value);
      await store.pull();
      // the replica's first sync reads everything again, into the core
      store.#pulledFrom = undefined;
    } catch (e) {
      await sql.end({ timeout: 1 });
      throw e;
    }
    return store;
  }

  meta(key: string): string | undefined {
    return this.#meta.get(key);
  }

  setMeta(key: string, value: string): void {
    this.#meta.set(key, value);
    this.#write(1, (sql) =>
      sql`insert into strata_meta (key, value) values (${key}, ${value})
          on conflict (key) do update set value = excluded.value`);
  }

  /** The value stored under `key`, made (by `make`) and stored by the first replica to ask. */
  async claimMeta(key: string, make: () => Promise<string>): Promise<string> {
    if (!this.#meta.has(key)) {
      const mine = await make();
      await this
        .#sql`insert into strata_meta (key, value) values (${key}, ${mine}) on conflict (key) do nothing`;
      const [row] = await this.#sql`select value from strata_meta where key = ${key}`;
      this.#meta.set(key, row.value);
    }
    return this.#meta.get(key)!;
  }

  saveNode(rec: NodeRecord): void {
    this.#nodes.set(rec.node, rec);
    const record = JSON.stringify(rec);
    this.#write(
      1,
      (sql) =>
        sql`insert into strata_nodes (node, record, deleted) values (${rec.node}, ${record}, false)
          on conflict (node) do update set record = excluded.record, deleted = false,
          written_by = pg_current_xact_id()`,
    );
  }

  deleteNode(node: string): void {
    this.#nodes.delete(node);
    // a tombstone, so the other replicas see the node go
    this.#write(
      1,
      (sql) =>
        sql`update strata_nodes set deleted = true, written_by = pg_current_xact_id() where node = ${node}`,
    );
  }

  nodes(): NodeRecord[] {
    return [...this.#nodes.values()].sort((a, b) => a.node < b.node ? -1 : a.node > b.node ? 1 : 0);
  }

  saveBeat(beat: Beat): void {
    this.#beats.set(beat.node, beat);
  }

  /** Sends the heartbeats taken since the last flush, in one statement. */
  flushBeats(): Promise<void> {
    if (this.#beats.size === 0) return this.#writes;
    const beats = [...this.#beats.values()];
    this.#beats = new Map();
    this.#write(
      beats.length,
      (sql) =>
        sql`insert into strata_leases (node, last_beat, sessions, session_ids, beat_from)
          select *, ${this.#self} from unnest(${sql.array(beats.map((b) => b.node))}::text[],
                               ${sql.array(beats.map((b) => String(b.at)))}::bigint[],
                               ${sql.array(beats.map((b) => b.sessions))}::integer[],
                               ${sql.array(beats.map((b) => JSON.stringify(b.sessionIds)))}::text[])
          on conflict (node) do update set
            last_beat = greatest(strata_leases.last_beat, excluded.last_beat),
            sessions = excluded.sessions, session_ids = excluded.session_ids,
            -- a later beat from another replica stays that replica's: this one reads it
            beat_from = case when excluded.last_beat >= strata_leases.last_beat
                        then excluded.beat_from else strata_leases.beat_from end,
            written_by = pg_current_xact_id()`,
    );
    return this.#writes;
  }

  saveAsk(req: PlaceRequest, at: number): void {
    const ask = toBinary(PlaceRequestSchema, req);
    this.#write(1, async (sql) => {
      await sql`insert into strata_asks (node, ask, at) values (${req.node}, ${ask}, ${at})
                on conflict (node) do update set ask = excluded.ask, at = excluded.at,
                written_by = pg_current_xact_id() where strata_asks.at <= excluded.at`;
      await sql`select pg_notify(${PLACE_CHANNEL}, '')`;
    });
  }

  /** The leader's plan changes; an ask it found nothing for is withdrawn. */
  savePlan(entries: readonly PlanEntry[]): void {
    const nodes = entries.map((e) => e.node);
    const starts = entries.map((e) => e.range?.start ?? -1);
    const ends = entries.map((e) => e.range?.end ?? -1);
    const ats = entries.map((e) => String(e.askedAt));
    const refused = entries.filter((e) => !e.range);
    this.#write(entries.length, async (sql) => {
      await sql`insert into strata_plan (node, start_layer, end_layer, asked_at)
                select * from unnest(${sql.array(nodes)}::text[], ${sql.array(starts)}::integer[],
                                     ${sql.array(ends)}::integer[], ${sql.array(ats)}::bigint[])
                on conflict (node) do update set start_layer = excluded.start_layer,
                  end_layer = excluded.end_layer, asked_at = excluded.asked_at,
                  written_by = pg_current_xact_id()`;
      if (refused.length > 0) {
        await sql`delete from strata_asks a
                  using unnest(${sql.array(refused.map((e) => e.node))}::text[],
                               ${sql.array(refused.map((e) => String(e.askedAt)))}::bigint[]) as g(node, at)
                  where a.node = g.node and a.at <= g.at`;
      }
      await sql`select pg_notify(${PLACE_CHANNEL}, '')`;
    });
  }

  /** Whether this replica leads placement: it holds the lock, or takes it now if free. */
  async lead(): Promise<boolean> {
    try {
      this.#leadConn ??= await this.#sql.reserve();
      const conn = this.#leadConn;
      const [r] = await conn`
        select exists (select 1 from pg_locks where locktype = 'advisory' and objid = ${PLACER_LOCK}
                       and pid = pg_backend_pid() and granted)
               or pg_try_advisory_lock(${PLACER_LOCK}) as leading`;
      return r.leading === true;
    } catch {
      // the connection broke: whatever it held went with it
      this.#leadConn?.release();
      this.#leadConn = undefined;
      return false;
    }
  }

  /** Calls `wake` when another replica wrote an ask or changed the plan. */
  async onPlaceChange(wake: () => void): Promise<void> {
    await this.#sql.listen(PLACE_CHANNEL, () => wake());
  }

  /** Resolves when every write so far is in the database. */
  flushed(): Promise<void> {
    return this.#writes;
  }

  /** Registrations, departures and heartbeats written since the last pull: the beats this
   *  replica took are left out, its registrations not (absorbing them again changes nothing). */
  async pull(): Promise<Changes> {
    const { from, rows: [nodes, leases] } = await this.#changed([
      ["strata_nodes", "node, record, deleted"],
      ["strata_leases", "node, last_beat, sessions, session_ids", true],
    ], this.#pulledFrom);
    this.#pulledFrom = from;
    const records: NodeRecord[] = [];
    const gone: string[] = [];
    for (const r of nodes) {
      if (r.deleted) {
        if (this.#nodes.delete(r.node)) gone.push(r.node);
        continue;
      }
      const rec = parseRecord(r.record);
      const mine = this.#nodes.get(rec.node);
      if (mine && JSON.stringify(mine) === JSON.stringify(rec)) continue;
      this.#nodes.set(rec.node, rec);
      records.push(rec);
    }
    const beats = leases.map((r) => ({
      node: r.node as string,
      at: Number(r.last_beat),
      sessions: Number(r.sessions),
      sessionIds: JSON.parse(r.session_ids) as string[],
    }));
    return { records, gone, beats };
  }

  /** Asks and plan lines written since the last call: small tables, read again whenever a
   *  replica says it wrote one (`onPlaceChange`), not only at the sync interval. */
  async pullPlacement(): Promise<PlacementChanges> {
    const { from, rows: [asks, plan] } = await this.#changed([
      ["strata_asks", "node, ask, at"],
      ["strata_plan", "node, start_layer, end_layer, asked_at"],
    ], this.#placePulledFrom);
    this.#placePulledFrom = from;
    return {
      asks: asks.map((r) => ({ req: fromBinary(PlaceRequestSchema, r.ask as Uint8Array), at: Number(r.at) })),
      plan: plan.map((r) => ({
        node: r.node as string,
        range: r.start_layer < 0 ? undefined : { start: Number(r.start_layer), end: Number(r.end_layer) },
        askedAt: Number(r.asked_at),
      })),
    };
  }

  /** The first of `count` route epochs, all above `after` and above every epoch reserved so far. */
  async reserveEpochs(count: number, after: bigint): Promise<bigint> {
    const [row] = await this.#sql`
      update strata_epochs set next = greatest(next, ${String(after + 1n)}::bigint) + ${count}
      where id = 1 returning next - ${count} as first`;
    this.written.statements++;
    this.written.rows++;
    return BigInt(row.first);
  }

  async close(): Promise<void> {
    await this.flushBeats().catch(() => {});
    await this.#sql.end({ timeout: 2 });
  }

  /**
   * The rows of each table written by transactions from `from` on (all of them without it),
   * read in one snapshot, and where the next look starts: the oldest transaction that snapshot
   * saw under way. Every transaction before that one was over, and its rows were read now.
   */
  async #changed(
    tables: ReadonlyArray<readonly [table: string, columns: string, ownBeats?: boolean]>,
    from: string | undefined,
  ) {
    return await this.#sql.begin("isolation level repeatable read read only", async (tx) => {
      const [{ xmin }] = await tx`select pg_snapshot_xmin(pg_current_snapshot())::text as xmin`;
      const rows = [];
      for (const [table, columns, ownBeats] of tables) {
        // after the first look: the rows written since, less the beats this replica took
        const others = ownBeats ? tx`and beat_from <> ${this.#self}` : tx``;
        rows.push(
          from === undefined
            ? await tx`select ${tx.unsafe(columns)} from ${tx(table)}`
            : await tx`select ${tx.unsafe(columns)} from ${
              tx(table)
            } where written_by >= ${from}::xid8 ${others}`,
        );
      }
      return { from: String(xmin), rows };
    });
  }

  /** Writes go out one after another, in the order they were made. */
  #write(rows: number, run: (sql: postgres.Sql) => Promise<unknown>): void {
    this.#writes = this.#writes.then(async () => {
      try {
        await run(this.#sql);
        this.written.statements++;
        this.written.rows += rows;
      } catch (e) {
        log.warn("tracker database write failed", { error: e instanceof Error ? e.message : String(e) });
      }
    });
  }
}

function parseRecord(text: string): NodeRecord {
  const r = JSON.parse(text) as NodeRecord;
  return { ...r, admission: parseAdmission(r.admission) };
}
