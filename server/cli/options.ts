// Option parsers shared by the subcommands.
import { InvalidArgumentError, Option } from "commander";
import { parseMemorySize } from "../../src/engine/memory-cap.ts";
import { NATIVE_BACKENDS, type NativeBackend } from "../../src/engine/backends.ts";

export const int = (name: string) => (v: string) => {
  const n = Number(v);
  if (!Number.isInteger(n) || n <= 0) throw new InvalidArgumentError(`${name} must be a positive integer`);
  return n;
};

/** An integer ≥ 0 (0 often meaning "no limit"). */
export const count = (name: string) => (v: string) => {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0) throw new InvalidArgumentError(`${name} must be an integer ≥ 0`);
  return n;
};

export const num = (name: string) => (v: string) => {
  const n = Number(v);
  if (!Number.isFinite(n) || n < 0) throw new InvalidArgumentError(`${name} must be a number ≥ 0`);
  return n;
};

/** A memory size (parseMemorySize: 512MB, 1.5GiB, 2G). */
export const memorySize = (v: string): number => {
  try {
    return parseMemorySize(v);
  } catch (e) {
    throw new InvalidArgumentError((e as Error).message);
  }
};

/** How --memory-cap reads, for help texts. */
export const MEMORY_SIZE_HELP = "MB/GB = 10^6/10^9 bytes, MiB/GiB and bare M/G = 2^20/2^30";

export const backendOption = () =>
  new Option("--backend <backend>", "native engine backend")
    .choices(NATIVE_BACKENDS.flatMap((b) => [b, `native-${b}`]))
    .default("native-cpu");

export const nativeBackend = (b: string): NativeBackend => b.replace(/^native-/, "") as NativeBackend;

/** host:port (host defaults to 127.0.0.1; port 0 picks a free one). */
export function hostPort(v: string): { host: string; port: number } {
  const m = /^(?:\[?([^\]]*)\]?:)?(\d+)$/.exec(v);
  if (!m) throw new InvalidArgumentError(`"${v}" is not host:port`);
  return { host: m[1] || "127.0.0.1", port: Number(m[2]) };
}

/** A server's address as others reach it: --public-url (checked, without a trailing /), else
 *  the address it listens at. */
export function publicUrl(given: string | undefined, listening: string): string {
  if (given === undefined) return listening;
  try {
    return new URL(given).href.replace(/\/$/, "");
  } catch {
    throw new InvalidArgumentError(`--public-url ${given} is not a URL`);
  }
}

export async function readJsonFile<T>(path: string, what: string): Promise<T> {
  try {
    return JSON.parse(await Deno.readTextFile(path)) as T;
  } catch (e) {
    throw new InvalidArgumentError(`${what} ${path}: ${e instanceof Error ? e.message : e}`);
  }
}

/** Resolves on SIGINT or SIGTERM. */
export function untilSignal(): Promise<string> {
  return new Promise((resolve) => {
    for (const sig of ["SIGINT", "SIGTERM"] as const) Deno.addSignalListener(sig, () => resolve(sig));
  });
}
