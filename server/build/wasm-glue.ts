// emscripten 3.1.6 writes one glue for browsers, Deno and Node, but picks its path by
// `typeof process`, which Deno defines too, and its Node path uses CommonJS names that an
// ES module does not have. Two edits after the link make the same files load in all three.

/** emscripten's Node test, minified or not */
const NODE_TEST =
  /typeof process\s*==\s*["']object["']\s*&&\s*typeof process\.versions\s*==\s*["']object["']\s*&&\s*typeof process\.versions\.node\s*==\s*["']string["']/g;

/** Node's path gets `require` and `__dirname`, scoped to the module (Node only). */
const COMMONJS_NAMES = `// Strata: the CommonJS names emscripten's Node path uses, for an ES module in Node
let require, __dirname;
if (typeof process == "object" && typeof process.versions?.node == "string" && typeof Deno == "undefined") {
  require = (await import("node:module")).createRequire(import.meta.url);
  __dirname = require("node:path").dirname(require("node:url").fileURLToPath(import.meta.url));
}
`;

/** Deno keeps the web path; throws when the glue no longer has the test it edits. */
export function adaptGlue(file: string, js: string): string {
  let found = 0;
  const out = js.replace(NODE_TEST, (t) => {
    found++;
    return `(${t}&&typeof Deno=="undefined")`;
  });
  if (!found) throw new Error(`${file}: emscripten's Node test was not found; the glue changed`);
  return file.endsWith(".mjs") ? COMMONJS_NAMES + out : out;
}
