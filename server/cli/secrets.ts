// Secrets on the command line, from files, or from the environment: one name per secret for every
// command. `--node-token <t>`, `--node-token-file <path>` or STRATA_NODE_TOKEN; the same shape for
// the relay secret, a relay token and API keys. A file keeps a secret out of argv (`ps` shows argv).
import { type Command, InvalidArgumentError } from "commander";

export interface Secret {
  /** the flag, without dashes: node-token, relay-secret, relay-token */
  readonly flag: string;
  readonly env: string;
  readonly what: string;
}

export const NODE_TOKEN: Secret = {
  flag: "node-token",
  env: "STRATA_NODE_TOKEN",
  what: "the tracker's node token",
};
export const RELAY_SECRET: Secret = {
  flag: "relay-secret",
  env: "STRATA_RELAY_SECRET",
  what: "the relay's secret (signs peer tokens)",
};
export const RELAY_TOKEN: Secret = {
  flag: "relay-token",
  env: "STRATA_RELAY_TOKEN",
  what: "this peer's relay token (strata relay token --name …)",
};

/** Adds --<flag> <value> and --<flag>-file <path>. */
export function addSecretOption<C extends Command>(cmd: C, s: Secret, what = s.what): C {
  return cmd
    .option(`--${s.flag} <value>`, `${what} (or --${s.flag}-file, or ${s.env})`)
    .option(`--${s.flag}-file <path>`, `read --${s.flag} from this file`) as C;
}

const camel = (flag: string) => flag.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());

/** Where secrets are read from (the process's own files and environment). */
export interface SecretSource {
  readFile(path: string): string;
  env(name: string): string | undefined;
}

const here: SecretSource = {
  readFile: (path) => Deno.readTextFileSync(path),
  env: (name) => Deno.env.get(name),
};

/** The secret from the flag, its file (one line) or the environment; undefined when none gives it. */
export function secretOf(
  o: Record<string, unknown>,
  s: Secret,
  from: SecretSource = here,
): string | undefined {
  const value = o[camel(s.flag)] as string | undefined;
  const file = o[camel(`${s.flag}-file`)] as string | undefined;
  if (value !== undefined && file !== undefined) {
    throw new InvalidArgumentError(`give --${s.flag} or --${s.flag}-file, not both`);
  }
  if (file !== undefined) {
    let text: string;
    try {
      text = from.readFile(file);
    } catch (e) {
      throw new InvalidArgumentError(`--${s.flag}-file ${file}: ${(e as Error).message}`);
    }
    const line = text.replace(/\r?\n$/, "");
    if (!line || line.includes("\n")) {
      throw new InvalidArgumentError(`--${s.flag}-file ${file}: one line, the secret`);
    }
    return line;
  }
  return value ?? (from.env(s.env) || undefined);
}

/** secretOf, required. */
export function needSecret(
  o: Record<string, unknown>,
  s: Secret,
  why = "",
  from: SecretSource = here,
): string {
  const v = secretOf(o, s, from);
  if (!v) throw new InvalidArgumentError(`${why}give --${s.flag}, --${s.flag}-file or set ${s.env}`);
  return v;
}
