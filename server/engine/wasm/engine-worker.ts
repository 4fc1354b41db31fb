// The WASM engine's worker under Deno (a module worker: see WorkerEngine).
import type { EnginePort } from "../../../src/engine/wasm/worker-protocol.ts";
import { serveEngineWorker } from "../../../src/engine/wasm/engine-worker.ts";
import { moduleWorkersOnly } from "./module-workers.ts";

moduleWorkersOnly();
serveEngineWorker(self as unknown as EnginePort);
