import { describe, expect, it } from "vitest";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

// The import directions the layout promises (README, Layout), read from the sources. Each `it`
// names one rule.
const root = fileURLToPath(new URL("../..", import.meta.url));

function sources(dir: string): string[] {
  if (!existsSync(join(root, dir))) return [];
  return readdirSync(join(root, dir)).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(join(root, path)).isDirectory()) return path === "src/gen" ? [] : sources(path);
    return path.endsWith(".ts") ? [path] : [];
  });
}

/** Every module a file imports (static and dynamic, types too), as a path from the root or a package name. */
function imports(file: string): string[] {
  const text = readFileSync(join(root, file), "utf8");
  const specs = [...text.matchAll(/(?:from|import)\s*\(?\s*["']([^"']+)["']/g)].map((m) => m[1]);
  return specs.map((s) => s.startsWith(".") ? relative(root, resolve(root, file, "..", s)) : s);
}

const under = (dirs: string[]) => (s: string) => dirs.some((d) => s.startsWith(`${d}/`));
const arrows = (files: string[], to: (s: string) => boolean) =>
  files.flatMap((f) => imports(f).filter(to).map((s) => `${f} → ${s}`));

/** The trees whose folders the graph rules cover: the core, the hosts' code, the processes and the checks. */
const TREES = ["src", "node-apis", "server", "nodejs", "web", "checks", "examples"];
const FILES = TREES.flatMap(sources);
/** Every import between two files of these trees (src/gen/ left out: generated, it imports only itself). */
const EDGES = FILES.flatMap((f) =>
  imports(f).filter((t) => FILES.includes(t)).map((t) => ({ from: f, to: t }))
);

/** A cycle in a graph given as node → (node → why), as its nodes with one reason per arrow; or none. */
function findCycle(graph: Map<string, Map<string, string>>): string[] | undefined {
  const state = new Map<string, "open" | "done">();
  const path: string[] = [];
  const visit = (v: string): string[] | undefined => {
    state.set(v, "open");
    path.push(v);
    for (const w of graph.get(v)?.keys() ?? []) {
      if (state.get(w) === "open") {
        const loop = [...path.slice(path.indexOf(w)), w];
        return loop.slice(1).map((to, i) => `${loop[i]} → ${to} (${graph.get(loop[i])!.get(to)})`);
      }
      const found = state.has(w) ? undefined : visit(w);
      if (found) return found;
    }
    path.pop();
    state.set(v, "done");
    return undefined;
  };
  for (const v of [...graph.keys()].sort()) {
    const found = state.has(v) ? undefined : visit(v);
    if (found) return found;
  }
  return undefined;
}

function graphOf(edges: { from: string; to: string; why: string }[]): Map<string, Map<string, string>> {
  const g = new Map<string, Map<string, string>>();
  for (const e of edges) {
    if (e.from === e.to) continue;
    if (!g.has(e.from)) g.set(e.from, new Map());
    if (!g.get(e.from)!.has(e.to)) g.get(e.from)!.set(e.to, e.why);
  }
  return g;
}

/** The five adapters every host hands the one node runtime (src/node/runtime.ts), one file each. */
const HOST_ADAPTERS = ["dialer.ts", "engine.ts", "listeners.ts", "piece-store.ts", "tracker.ts"];
const HOSTS = ["server/host", "nodejs/host", "web/host"];

describe("layout", () => {
  it("src/ imports nothing outside src/ and no runtime API", () => {
    const bad = sources("src").flatMap((f) =>
      imports(f)
        .filter((s) =>
          under(["server", "web", "checks", "nodejs", "node-apis", "test"])(s) || s.startsWith("node:")
        )
        .map((s) => `${f} → ${s}`)
    );
    const runtime = sources("src").filter((f) =>
      /\bDeno\.|\bprocess\.(env|argv)|\brequire\(/.test(readFileSync(join(root, f), "utf8"))
    );
    expect(bad).toEqual([]);
    expect(runtime).toEqual([]);
  });

  it("src/ uses no browser-only API (Worker, the DOM, OPFS): a page's adapters are in web/host/", () => {
    const browser = sources("src").filter((f) =>
      /\bnew Worker\(|\bdocument\.|\blocation\.|navigator\.storage|\blocalStorage\b|\bindexedDB\b/.test(
        readFileSync(join(root, f), "utf8"),
      )
    );
    expect(browser).toEqual([]);
  });

  it("node-apis/ imports only src/ and itself: Deno's and Node's adapters share it", () => {
    const out = arrows(
      sources("node-apis"),
      under(["server", "nodejs", "web", "checks", "test", "examples"]),
    );
    expect(out).toEqual([]);
  });

  it("nodejs/ imports only src/, node-apis/ and itself; web/ only src/ and itself", () => {
    expect(arrows(sources("nodejs"), under(["server", "web", "checks", "test", "examples"]))).toEqual([]);
    expect(arrows(sources("web"), under(["server", "nodejs", "node-apis", "checks", "test", "examples"])))
      .toEqual([]);
  });

  it("server/ imports nothing from checks/, test/, web/ or nodejs/ (pages are bundled by path)", () => {
    expect(arrows(sources("server"), under(["checks", "test", "web", "nodejs"]))).toEqual([]);
  });

  it("checks/ imports nothing from test/: a tree without the tests keeps every check command", () => {
    expect(arrows(sources("checks"), under(["test"]))).toEqual([]);
  });

  it("every host folder holds the same adapters: dialer, engine, listeners, piece-store, tracker", () => {
    for (const host of HOSTS) {
      const files = existsSync(join(root, host)) ? readdirSync(join(root, host)) : [];
      expect({ host, missing: HOST_ADAPTERS.filter((a) => !files.includes(a)) }).toEqual({
        host,
        missing: [],
      });
    }
  });

  it("the CLI loads a subcommand's module only when it runs (server/cli.ts imports no command statically)", () => {
    const text = readFileSync(join(root, "server/cli.ts"), "utf8");
    const fixed = [...text.matchAll(/^import [^(]*?from\s*["'](\.[^"']+)["']/gm)].map((m) => m[1]);
    expect(fixed.filter((s) => !s.startsWith("./process/"))).toEqual([]);
  });

  it("folders import each other without a cycle (a folder's own files are one node)", () => {
    const folders = graphOf(
      EDGES.map((e) => ({ from: dirname(e.from), to: dirname(e.to), why: `${e.from} → ${e.to}` })),
    );
    expect(findCycle(folders)).toBeUndefined();
  });

  it("the files of one folder import each other without a cycle", () => {
    const within = EDGES.filter((e) => dirname(e.from) === dirname(e.to));
    expect(findCycle(graphOf(within.map((e) => ({ ...e, why: "imports" }))))).toBeUndefined();
  });

  // An upward arrow: a file below a folder importing that folder's root files, where those root
  // files import down into the folder's subfolders. A folder's root files are either its port,
  // which its subfolders implement (src/engine/range-engine.ts for wasm/), or its entry points
  // above them (server/cli.ts): never both.
  it("no upward arrow: a folder's root files are its port or its entry points, never both", () => {
    const bad = [...new Set(FILES.map(dirname))].flatMap((d) => {
      const down = EDGES.filter((e) => dirname(e.from) === d && dirname(e.to).startsWith(`${d}/`));
      const up = EDGES.filter((e) => dirname(e.from).startsWith(`${d}/`) && dirname(e.to) === d);
      return down.length && up.length
        ? [`${d}: ${down[0].from} → ${down[0].to}, and ${up[0].from} → ${up[0].to}`]
        : [];
    });
    expect(bad).toEqual([]);
  });
});
