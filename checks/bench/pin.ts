// A process held to one core, and what the kernel counts for it: a core per process stands in
// for a machine per node on a machine with two (Linux; taskset from util-linux).
import { statusBytes } from "./figures.ts";

/** Every thread of `pid` on `cpu`; threads it makes later inherit it. */
export async function pin(pid: number, cpu: number | string): Promise<void> {
  const out = await new Deno.Command("taskset", {
    args: ["-a", "-p", "-c", String(cpu), String(pid)],
    stdout: "null",
    stderr: "piped",
  }).output();
  if (!out.success) throw new Error(`taskset ${cpu} ${pid}: ${new TextDecoder().decode(out.stderr).trim()}`);
}

/** The cores this process may run on now, as taskset writes them ("0-1"). */
export async function coresOf(pid: number): Promise<string> {
  const status = await Deno.readTextFile(`/proc/${pid}/status`);
  return /Cpus_allowed_list:\s+(\S+)/.exec(status)?.[1] ?? "0";
}

/** The keep-awake spinner's thread (strata_keep_awake): idle time it took, not work. */
const SPINNER = "strata-awake";
/** Deno's blocking pool, where a native engine's calls run (FFI `nonblocking`) */
const ENGINE = "tokio-runtime-w";

/**
 * CPU time of `pid`'s threads so far, in ms (schedstat: nanoseconds on the CPU), by what they
 * do in a Deno node: the engine's calls (the blocking pool), everything else of the process
 * (the event loop, V8's helpers), and what its keep-awake spinner took of the core's idle time.
 */
export async function cpuMs(pid: number): Promise<{ engine: number; work: number; spinner: number }> {
  let engine = 0, work = 0, spinner = 0;
  for await (const t of Deno.readDir(`/proc/${pid}/task`)) {
    const dir = `/proc/${pid}/task/${t.name}`;
    const [stat, comm] = await Promise.all([
      Deno.readTextFile(`${dir}/schedstat`).catch(() => "0"),
      Deno.readTextFile(`${dir}/comm`).catch(() => ""),
    ]);
    const ns = Number(stat.split(" ")[0]);
    const name = comm.trim();
    if (name === SPINNER) spinner += ns;
    else if (name === ENGINE) engine += ns;
    else work += ns;
  }
  return { engine: engine / 1e6, work: work / 1e6, spinner: spinner / 1e6 };
}

/** The process's resident high-water mark, in bytes (0 when it is gone). */
export const peakRss = (pid: number) => statusBytes(pid, "VmHWM");
