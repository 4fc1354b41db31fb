// The WASM engine's worker in a page (bundled, served beside the engine's files as
// {engine base}/worker.js): see src/engine/wasm/worker-engine.ts.
import type { EnginePort } from "../../src/engine/wasm/worker-protocol.ts";
import { serveEngineWorker } from "../../src/engine/wasm/engine-worker.ts";

serveEngineWorker(self as unknown as EnginePort);
