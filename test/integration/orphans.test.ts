// A service process whose parent is killed outright (SIGKILL: no chance to stop its children)
// exits by itself (server/process/parent-watch.ts), instead of keeping its port for good.
import { spawn } from "node:child_process";
import { describe, expect, it } from "vitest";
import { deno, root } from "./strata.ts";

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("service processes", () => {
  it("end when the process that started them is killed", async () => {
    const parent = spawn(deno, [
      "run",
      "--allow-all",
      "--quiet",
      "--config",
      `${root}deno.json`,
      `${root}test/integration/orphans.deno.ts`,
    ], { stdio: ["ignore", "pipe", "inherit"] });
    const childPid = await new Promise<number>((resolve, reject) => {
      let out = "";
      parent.stdout.setEncoding("utf8").on("data", (d) => {
        out += d;
        const line = out.split("\n").find((l) => l.startsWith("{"));
        if (line) resolve(JSON.parse(line).pid);
      });
      parent.on("close", () => reject(new Error("the parent ended before its child was ready")));
    });
    expect(alive(childPid)).toBe(true);
    // still there while its parent is
    await sleep(1500);
    expect(alive(childPid)).toBe(true);
    parent.kill("SIGKILL");
    let waited = 0;
    while (alive(childPid) && waited < 10_000) {
      await sleep(100);
      waited += 100;
    }
    const orphaned = alive(childPid);
    if (orphaned) process.kill(childPid, "SIGKILL");
    expect(orphaned).toBe(false);
  });
});
