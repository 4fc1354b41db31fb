// The tracker's storage port on PostgreSQL, shared by any number of tracker replicas: the
// route key, every registration with its verdict, heartbeats and the route epoch counter.
// A replica keeps all of it in memory and answers from there (a route request never waits on
// the database): its own writes go out in order behind the answer, heartbeats in one batched
// statement per flush, and `pull` brings in what the other replicas wrote since the last pull.
import postgres from "postgres";
import { parseAdmission } from "../../src/tracker/admission.ts";
import type { Beat, NodeRecord, TrackerStorage } from "../../src/tracker/storage.ts";
import { log } from "../log/log.ts";

/** What the other replicas wrote since the last pull. */
export interface Changes {
  readonly records: NodeRecord[];
  readonly gone: string[];
  readonly beats: Beat[];
}

/** Rows are read again this long after they were written: a write that committed after a
 *  later one (both in flight at a pull) is not missed. */
const OVERLAP = "2 seconds";

const SCHEMA = `
  create table if not exists strata_meta (key text primary key, value text not null);
  create table if not exists strata_nodes (
    node text primary key, record text not null, deleted boolean not null,
    updated_at timestamptz not null default clock_timestamp()
  );
  create index if not exists strata_nodes_updated on strata_nodes (updated_at);
  create table if not exists strata_leases (
    node text primary key, last_beat bigint not null, sessions integer not null,
    session_ids text not null, updated_at timestamptz not null default clock_timestamp()
  );
  create index if not exists strata_leases_updated on strata_leases (updated_at);
  create table if not exists strata_epochs (id integer primary key, next bigint not null);
`;

export class PgTrackerStore implements TrackerStorage {
  readonly #sql: postgres.Sql;
  readonly #meta = new Map<string, string>();
  readonly #nodes = new Map<string, NodeRecord>();
  #writes: Promise<void> = Promise.resolve();
  #beats = new Map<string, Beat>();
  #pulledAt: Date | undefined;
  /** statements and rows written, for the bench */
  readonly written = { statements: 0, rows: 0 };

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
          updated_at = clock_timestamp()`,
    );
  }

  deleteNode(node: string): void {
    this.#nodes.delete(node);
    // a tombstone, so the other replicas see the node go
    this.#write(
      1,
      (sql) =>
        sql`update strata_nodes set deleted = true, updated_at = clock_timestamp() where node = ${node}`,
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
    this.#write(beats.length, (sql) =>
      sql`insert into strata_leases (node, last_beat, sessions, session_ids)
          select * from unnest(${sql.array(beats.map((b) => b.node))}::text[],
                               ${sql.array(beats.map((b) => String(b.at)))}::bigint[],
                               ${sql.array(beats.map((b) => b.sessions))}::integer[],
                               ${sql.array(beats.map((b) => JSON.stringify(b.sessionIds)))}::text[])
          on conflict (node) do update set
            last_beat = greatest(strata_leases.last_beat, excluded.last_beat),
            sessions = excluded.sessions, session_ids = excluded.session_ids,
            updated_at = clock_timestamp()`);
    return this.#writes;
  }

  /** Resolves when every write so far is in the database. */
  flushed(): Promise<void> {
    return this.#writes;
  }

  /** Registrations, departures and heartbeats written since the last pull (ours included:
   *  absorbing them again changes nothing). */
  async pull(): Promise<Changes> {
    const since = this.#pulledAt;
    const [{ at }] = await this.#sql`select clock_timestamp() as at`;
    const nodes = since
      ? await this.#sql`select node, record, deleted from strata_nodes
                        where updated_at > ${since}::timestamptz - ${OVERLAP}::interval`
      : await this.#sql`select node, record, deleted from strata_nodes`;
    const leases = since
      ? await this.#sql`select node, last_beat, sessions, session_ids from strata_leases
                        where updated_at > ${since}::timestamptz - ${OVERLAP}::interval`
      : await this.#sql`select node, last_beat, sessions, session_ids from strata_leases`;
    this.#pulledAt = at;
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
