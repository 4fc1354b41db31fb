import { describe, expect, it } from "vitest";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { needSecret, NODE_TOKEN, secretOf, type SecretSource } from "../../server/cli/secrets.ts";

const dir = mkdtempSync(join(tmpdir(), "strata-secrets-"));
const file = (name: string, text: string) => {
  const p = join(dir, name);
  writeFileSync(p, text);
  return p;
};

const env: Record<string, string> = {};
const from: SecretSource = { readFile: (p) => readFileSync(p, "utf8"), env: (n) => env[n] };

describe("secrets: one name each, from a flag, a file or the environment", () => {
  it("takes the flag, else the file's one line, else the environment", () => {
    env.STRATA_NODE_TOKEN = "from-env";
    expect(secretOf({ nodeToken: "from-flag" }, NODE_TOKEN, from)).toBe("from-flag");
    expect(secretOf({ nodeTokenFile: file("t1", "from-file\n") }, NODE_TOKEN, from)).toBe("from-file");
    expect(secretOf({}, NODE_TOKEN, from)).toBe("from-env");
    delete env.STRATA_NODE_TOKEN;
    expect(secretOf({}, NODE_TOKEN, from)).toBeUndefined();
  });

  it("refuses both forms at once, a missing or empty file, several lines, and none where one is needed", () => {
    expect(() => secretOf({ nodeToken: "a", nodeTokenFile: file("t2", "b") }, NODE_TOKEN, from)).toThrow(
      /not both/,
    );
    expect(() => secretOf({ nodeTokenFile: join(dir, "missing") }, NODE_TOKEN, from)).toThrow(
      /--node-token-file/,
    );
    expect(() => secretOf({ nodeTokenFile: file("t3", "\n") }, NODE_TOKEN, from)).toThrow(/one line/);
    expect(() => secretOf({ nodeTokenFile: file("t4", "a\nb\n") }, NODE_TOKEN, from)).toThrow(/one line/);
    expect(() => needSecret({}, NODE_TOKEN, "--tracker: ", from)).toThrow(
      "--tracker: give --node-token, --node-token-file or set STRATA_NODE_TOKEN",
    );
  });
});
