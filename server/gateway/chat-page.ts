// The gateway's chat page: a conversation streamed from /v1/chat/completions, with the
// route and each node's telemetry under every reply; and the stylesheet its pages share.
import type { Hono } from "hono";
import { join } from "node:path";
import { bundleWebEntry } from "../browser/bundle.ts";
import { repoRoot } from "../process/paths.ts";

export async function chatPageRoutes(app: Hono): Promise<void> {
  const [page, css, bundle] = await Promise.all([
    Deno.readTextFile(join(repoRoot, "web", "chat", "index.html")),
    Deno.readTextFile(join(repoRoot, "web", "base.css")),
    bundleWebEntry("web/chat/main.ts"),
  ]);
  // same-origin, so the cross-origin isolated volunteer page may use it too
  app.get("/assets/base.css", (c) => c.body(css, 200, { "Content-Type": "text/css" }));
  app.get("/", (c) => c.redirect("/chat/"));
  app.get("/chat", (c) => c.redirect("/chat/"));
  app.get("/chat/", (c) => c.html(page));
  app.get("/chat/main.js", (c) => c.body(bundle, 200, { "Content-Type": "text/javascript" }));
}
