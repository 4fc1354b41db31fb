// The gateway's sessions now, counted by route: what the network page shows as routes in use.
export class ActiveRoutes {
  readonly #count = new Map<string, number>();

  /** One more session on `route`; the returned function ends it (once). */
  open(route: string): () => void {
    this.#count.set(route, (this.#count.get(route) ?? 0) + 1);
    let open = true;
    return () => {
      if (!open) return;
      open = false;
      const n = (this.#count.get(route) ?? 1) - 1;
      if (n > 0) this.#count.set(route, n);
      else this.#count.delete(route);
    };
  }

  snapshot(): Array<{ name: string; sessions: number }> {
    return [...this.#count].map(([name, sessions]) => ({ name, sessions })).sort((a, b) =>
      a.name.localeCompare(b.name)
    );
  }
}
