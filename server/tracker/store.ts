// The tracker's storage port in SQLite (node:sqlite): the route key (tickets stay
// verifiable) and every registration with its admission verdict.
import { DatabaseSync } from "node:sqlite";
import { parseAdmission } from "../../src/tracker/admission/admission.ts";
import type { NodeRecord, TrackerStorage } from "../../src/tracker/membership/storage.ts";

export class TrackerStore implements TrackerStorage {
  readonly #db: DatabaseSync;

  constructor(path: string) {
    this.#db = new DatabaseSync(path);
    this.#db.exec(`
      create table if not exists meta (key text primary key, value text not null);
      create table if not exists nodes (
        node text primary key, urls text not null, artifact text not null,
        layer_start integer not null, layer_end integer not null, engine text not null,
        kv_cells integer not null, max_sessions integer not null, tokens_per_s real not null,
        admission text not null, updated_at integer not null
      );`);
    // databases from before artifact URLs
    const columns = this.#db.prepare("pragma table_info(nodes)").all() as { name: string }[];
    if (!columns.some((c) => c.name === "artifact_url")) {
      this.#db.exec("alter table nodes add column artifact_url text not null default ''");
    }
    // databases from before per-session cells (0: as many as the node's kv_cells)
    if (!columns.some((c) => c.name === "session_cells")) {
      this.#db.exec("alter table nodes add column session_cells integer not null default 0");
    }
    // databases from before memory caps (0: no cap advertised)
    if (!columns.some((c) => c.name === "memory_cap_bytes")) {
      this.#db.exec("alter table nodes add column memory_cap_bytes integer not null default 0");
    }
  }

  meta(key: string): string | undefined {
    const row = this.#db.prepare("select value from meta where key = ?").get(key) as
      | { value: string }
      | undefined;
    return row?.value;
  }

  setMeta(key: string, value: string): void {
    this.#db.prepare("insert or replace into meta (key, value) values (?, ?)").run(key, value);
  }

  saveNode(n: NodeRecord): void {
    this.#db.prepare(
      `insert or replace into nodes (node, urls, artifact, layer_start, layer_end, engine, kv_cells, max_sessions,
       tokens_per_s, admission, updated_at, artifact_url, session_cells, memory_cap_bytes)
       values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    ).run(
      n.node,
      JSON.stringify(n.urls),
      n.artifact,
      n.start,
      n.end,
      n.engine,
      n.kvCells,
      n.maxSessions,
      n.tokensPerS,
      n.admission,
      Date.now(),
      n.artifactUrl,
      n.sessionCells,
      n.memoryCapBytes,
    );
  }

  deleteNode(node: string): void {
    this.#db.prepare("delete from nodes where node = ?").run(node);
  }

  nodes(): NodeRecord[] {
    const rows = this.#db.prepare("select * from nodes order by node").all() as Record<
      string,
      string | number
    >[];
    return rows.map((r) => ({
      node: String(r.node),
      urls: JSON.parse(String(r.urls)),
      artifact: String(r.artifact),
      start: Number(r.layer_start),
      end: Number(r.layer_end),
      engine: String(r.engine),
      kvCells: Number(r.kv_cells),
      sessionCells: Number(r.session_cells) || Number(r.kv_cells),
      maxSessions: Number(r.max_sessions),
      tokensPerS: Number(r.tokens_per_s),
      artifactUrl: String(r.artifact_url ?? ""),
      memoryCapBytes: Number(r.memory_cap_bytes ?? 0),
      admission: parseAdmission(String(r.admission)),
    }));
  }

  close(): void {
    this.#db.close();
  }
}
