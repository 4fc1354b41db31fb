import { describe, expect, it } from "vitest";
import { denoRun, root } from "./strata.ts";

describe("a network the LAN can reach (strata up --listen --data), as docs/deploy.md runs it", () => {
  it("binds every part to the address, lets a node join with the token from --data, shows it in strata status, and keeps it across a restart", async () => {
    const r = await denoRun(`${root}test/integration/lan.deno.ts`);
    expect(r.code, r.stderr.slice(-3000)).toBe(0);
    const out = JSON.parse(r.stdout.trim().split("\n").pop()!);
    expect(out.urls.gateway).toMatch(/^http:\/\/127\.0\.0\.2:\d+$/);
    expect(out.urls.tracker).toBe("http://127.0.0.2:7600");
    expect(out.urls.relay).toBe("ws://127.0.0.2:7700");
    expect(out.before.nodes).toContain("by-hand");
    expect(out.before.nodes).toHaveLength(3);
    expect(out.status_text).toMatch(/^ {2}by-hand +\d+:\d+ +native-cpu +admitted /m);
    expect(out.before.chat.status).toBe(200);
    // secrets are in the processes' environment, never their argv
    expect(out.secret_in_argv).toBe(false);
    expect(out.files).toEqual(expect.arrayContaining(["node-token", "relay-secret", "tracker.db"]));
    // restarted from the same folder: the same token and tracker address, the node still admitted
    expect(out.after.token_same).toBe(true);
    expect(out.after.tracker).toBe("http://127.0.0.2:7600");
    expect(out.after.by_hand).toMatchObject({ live: true, admission: "admitted" });
    expect(out.after.chat.status).toBe(200);
    expect(out.after.chat.text).toBe(out.before.chat.text);
  });
});
