// Routes that repair themselves: 16 streamed chats (greedy and seeded) of 96 tokens while
// four nodes are killed one at a time (a first node, a last node, a relay-only node, any) and
// the tracker is killed and started again,
// then 16 chats while a headless tab holding a range is closed (when Chromium is here).
// Prints one JSON object; chaos.test.ts asserts on it.
import { existsSync } from "node:fs";
import { runChaos } from "../../checks/bench/chaos.ts";

const say = (line: string) => console.error(line);
// the tracker is killed halfway too: strata up starts it again, and no request may notice
// (and at the end the gateway, under 4 streams: its sessions end on every node)
const kills = await runChaos({
  kills: 4,
  sessions: 16,
  tokens: 96,
  restartTracker: true,
  restartGateway: true,
  say,
});
const chromium = existsSync(Deno.env.get("STRATA_CHROMIUM") ?? "/usr/bin/chromium");
// the tab is one of three holders of the first range, so one of the three disjoint routes
// runs through it and it carries sessions when it is closed; nodes take 4 sessions at once
const tab = chromium
  ? await runChaos({ kills: 1, sessions: 16, tokens: 64, tab: true, maxSessions: 4, say })
  : null;
console.log(JSON.stringify({ kills, tab }));
