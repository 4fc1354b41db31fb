import { describe, expect, it } from "vitest";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

// The import directions the layout promises (README, Layout), read from the sources.
const root = fileURLToPath(new URL("../..", import.meta.url));

function sources(dir: string): string[] {
  return readdirSync(join(root, dir)).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(join(root, path)).isDirectory()) return path === "src/gen" ? [] : sources(path);
    return path.endsWith(".ts") ? [path] : [];
  });
}

/** Every module a file imports (static and dynamic), as a path from the root or a package name. */
function imports(file: string): string[] {
  const text = readFileSync(join(root, file), "utf8");
  const specs = [...text.matchAll(/(?:from|import)\s*\(?\s*["']([^"']+)["']/g)].map((m) => m[1]);
  return specs.map((s) => s.startsWith(".") ? relative(root, resolve(root, file, "..", s)) : s);
}

const under = (dirs: string[]) => (s: string) => dirs.some((d) => s.startsWith(`${d}/`));

describe("layout", () => {
  it("src/ imports nothing outside src/ and no runtime API", () => {
    const bad = sources("src").flatMap((f) =>
      imports(f)
        .filter((s) => under(["server", "web", "checks", "nodejs", "test"])(s) || s.startsWith("node:"))
        .map((s) => `${f} → ${s}`)
    );
    const runtime = sources("src").filter((f) =>
      /\bDeno\.|\bprocess\.(env|argv)|\brequire\(/.test(readFileSync(join(root, f), "utf8"))
    );
    expect(bad).toEqual([]);
    expect(runtime).toEqual([]);
  });

  it("server/ and web/ import nothing from the checks; web/ only the core and itself", () => {
    const fromChecks = [...sources("server"), ...sources("web")].flatMap((f) =>
      imports(f).filter(under(["checks", "test"])).map((s) => `${f} → ${s}`)
    );
    expect(fromChecks).toEqual([]);
    const webOut = sources("web").flatMap((f) =>
      imports(f).filter(under(["server", "nodejs"])).map((s) => `${f} → ${s}`)
    );
    expect(webOut).toEqual([]);
  });

  it("checks/ imports nothing from test/: a tree without the tests keeps every check command", () => {
    const fromTests = sources("checks").flatMap((f) =>
      imports(f).filter(under(["test"])).map((s) => `${f} → ${s}`)
    );
    expect(fromTests).toEqual([]);
  });
});
