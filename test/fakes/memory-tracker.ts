// A tracker in memory for the tests of its Connect binding and of what stands in front of it:
// the real TrackerCore and service over a 4-layer synthetic model, every probe passing, its
// client on an in-memory transport.
import { createClient, createRouterTransport } from "@connectrpc/connect";
import { TrackerService } from "../../src/gen/strata/tracker/v1/tracker_pb.ts";
import { uniformKv } from "../../src/gguf/kv-shape.ts";
import { buildManifest } from "../../src/gguf/manifest.ts";
import { parseGgufHeader } from "../../src/gguf/reader.ts";
import { synthModel } from "../../src/model/synth.ts";
import { MemoryStorage } from "../../src/tracker/membership/storage.ts";
import { TrackerCore } from "../../src/tracker/core/tracker-core.ts";
import { trackerRoutes } from "../../server/tracker/service.ts";
import { certifier } from "../../server/tracker/certify.ts";
import type { NetworkCa } from "../../node-apis/tls/certs.ts";

export async function memoryTracker(o: {
  readonly artifact: string;
  readonly nodeToken: string;
  readonly ca?: NetworkCa;
  readonly nodeCallsPerMin?: number;
}) {
  const file = synthModel({ arch: "qwen3", nLayer: 4 });
  const core = await TrackerCore.open({
    storage: new MemoryStorage(),
    model: {
      artifact: o.artifact,
      nLayer: 4,
      manifest: buildManifest(parseGgufHeader(file), file.length, o.artifact),
      kv: uniformKv(4, 32),
    },
    leaseMs: 2_000,
    probe: () => Promise.resolve({ ok: true, maxAbsDiff: 0, allowed: 1, detail: "" }),
  });
  const client = createClient(
    TrackerService,
    createRouterTransport(trackerRoutes(core, o.nodeToken, certifier(o.ca), o.nodeCallsPerMin)),
  );
  return { core, client };
}
