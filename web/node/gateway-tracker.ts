// A tab's way to the tracker: the gateway's volunteer API, which speaks to the tracker on its
// behalf (browsers speak neither h2c nor the node token). The tab's relay token names it.
import type { TrackerPort } from "../../src/node/membership.ts";
import { fromBase64 } from "../../src/bytes/base64.ts";

/** POSTs JSON to the gateway; an OpenAI-shaped error becomes its message. */
export async function postJson<T>(path: string, body: unknown): Promise<T> {
  const r = await fetch(path, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const j = await r.json();
  if (!r.ok) throw new Error(j?.error?.message ?? `${path}: HTTP ${r.status}`);
  return j as T;
}

export function gatewayTracker(api: string, token: string): TrackerPort {
  return {
    // the gateway knows the artifact and the tab's relay URL: the rest of the advert goes over
    register: async (_urls, shard) => {
      const r = await postJson<{ leaseMs: number; routePublicKey: string }>(`${api}/join`, {
        token,
        range: { start: shard.range?.start, end: shard.range?.end },
        engine: shard.engine,
        decodeTokensPerS: shard.decodeTokensPerS,
        kvCells: shard.kvCells,
        sessionCells: shard.sessionCells,
        maxSessions: shard.maxSessions,
        memoryCapBytes: Number(shard.memoryCapBytes ?? 0),
        artifactUrl: shard.artifactUrl,
      });
      return { leaseMs: r.leaseMs, routePublicKey: fromBase64(r.routePublicKey) };
    },
    heartbeat: async (load) => await postJson(`${api}/heartbeat`, { token, ...load }),
    // a tab going away cannot await: the beacon outlives the page
    leave: () => Promise.resolve(void navigator.sendBeacon(`${api}/leave`, token)),
    close: () => {},
  };
}
