// A throwaway PostgreSQL server for the tracker-replica tests and `strata bench tracker`: the
// OS package's binaries, a cluster in a temporary directory, loopback only, removed on stop.
// PostgreSQL will not run as root: as root, the cluster belongs to the package's `postgres`
// user and its commands run as that user.
import { existsSync } from "node:fs";
import { runCommand } from "../process/run.ts";
import { freePort } from "../http/free-port.ts";

export interface Postgres {
  /** postgres://… of a database the tracker may make its tables in */
  readonly url: string;
  readonly dir: string;
  stop(): Promise<void>;
}

/** The newest installed server's bin directory, if any. */
export function postgresBin(): string | undefined {
  const root = "/usr/lib/postgresql";
  if (!existsSync(root)) return undefined;
  const versions = [...Deno.readDirSync(root)].map((e) => e.name).filter((n) => /^\d+$/.test(n));
  versions.sort((a, b) => Number(b) - Number(a));
  for (const v of versions) {
    if (existsSync(`${root}/${v}/bin/pg_ctl`)) return `${root}/${v}/bin`;
  }
  return undefined;
}

export async function startPostgres(): Promise<Postgres> {
  const bin = postgresBin();
  if (!bin) throw new Error("no PostgreSQL server installed (apt-get install postgresql)");
  const dir = await Deno.makeTempDir({ prefix: "strata-pg-" });
  const asRoot = Deno.uid() === 0;
  const run = (cmd: string, args: string[]) =>
    asRoot
      ? runCommand("runuser", ["-u", "postgres", "--", `${bin}/${cmd}`, ...args])
      : runCommand(`${bin}/${cmd}`, args);
  if (asRoot) await runCommand("chown", ["postgres:postgres", dir]);
  const data = `${dir}/data`;
  await run("initdb", ["-D", data, "-A", "trust", "-U", "strata", "--no-sync", "-E", "UTF8"]);
  const port = freePort();
  // durability is not what these clusters are for
  const opts = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off ` +
    `-c full_page_writes=off -c max_connections=200`;
  await run("pg_ctl", ["-D", data, "-o", opts, "-l", `${dir}/server.log`, "-w", "start"]);
  let stopped = false;
  return {
    url: `postgres://strata@127.0.0.1:${port}/postgres`,
    dir,
    stop: async () => {
      if (stopped) return;
      stopped = true;
      await run("pg_ctl", ["-D", data, "-m", "immediate", "-w", "stop"]).catch(() => {});
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    },
  };
}
