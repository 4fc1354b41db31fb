// The control plane of a local network stays up: a tracker or gateway that dies is started
// again at the same address (the tracker from its database). Nodes keep serving through it
// and beat to the new tracker; repairs wait for it; a new gateway serves new requests.
import type { ServiceProcess } from "../process/service-process.ts";

export class KeepUp {
  #stopping = false;
  readonly #pids = new Map<string, number>();

  constructor(
    private readonly started: ServiceProcess[],
    private readonly say: (what: string) => void,
  ) {}

  /** The network is stopping: what exits now stays down. */
  stop(): void {
    this.#stopping = true;
  }

  /** The process now behind `label`. */
  pid(label: string): number {
    return this.#pids.get(label)!;
  }

  /** Watches `p` (serving at `url`); when it exits before stop(), `again` starts it there. */
  watch(p: ServiceProcess, url: string, again: (listen: string) => Promise<ServiceProcess>): void {
    this.#pids.set(p.label, p.child.pid);
    void p.child.status.then(async (status) => {
      if (this.#stopping) return;
      this.say(`${p.label.padEnd(8)} exited (${status.signal ?? status.code}); starting it again at ${url}`);
      const next = await again(new URL(url).host).catch((e) => {
        this.say(`${p.label.padEnd(8)} could not start again: ${e instanceof Error ? e.message : e}`);
        return undefined;
      });
      if (!next) return;
      this.started.splice(this.started.indexOf(p), 1, next);
      if (this.#stopping) return void next.stop();
      this.watch(next, url, again);
    });
  }
}
