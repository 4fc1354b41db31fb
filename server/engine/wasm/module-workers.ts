// Emscripten starts its pthread workers as classic scripts; Deno only runs module
// workers, and the generated worker loads the main module with import(), so forcing the
// type is all it takes. Applied wherever a module is instantiated: the engine's worker,
// and the main thread of a process that instantiates one directly (the smoke check).

export function moduleWorkersOnly(): void {
  const g = globalThis as { Worker: typeof Worker; strataModuleWorkers?: true };
  if (g.strataModuleWorkers) return;
  const Base = g.Worker;
  g.Worker = class extends Base {
    constructor(url: string | URL, options?: WorkerOptions) {
      super(url, { ...options, type: "module" });
    }
  };
  g.strataModuleWorkers = true;
}
