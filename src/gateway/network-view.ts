// What the network page shows, computed from two successive looks at the tracker: how many
// live, admitted nodes hold each layer (gaps and thin spots), and what changed in between
// (a node joined, moved to another range, or left).

export interface NodeView {
  readonly node: string;
  readonly start: number;
  readonly end: number;
  readonly engine: string;
  readonly live: boolean;
  readonly admission: string;
  /** its memory cap (0: none advertised) and what its range takes under its settings */
  readonly capBytes: number;
  readonly needBytes: number;
  readonly tokensPerS: number;
  readonly sessions: number;
}

export interface NetworkState {
  readonly model: { readonly name: string; readonly nLayer: number; readonly artifact: string };
  readonly nodes: readonly NodeView[];
  /** the tracker's route key (public, raw Ed25519, hex): the same across replicas and restarts */
  readonly routeKey?: string;
  /** the gateway's sessions now, by route */
  readonly routes: ReadonlyArray<{ readonly name: string; readonly sessions: number }>;
  /** ms since the epoch */
  readonly at: number;
}

const serving = (n: NodeView) => n.live && n.admission === "admitted";

/** Hosts per layer: 0 is a gap (no route exists), 1 a thin spot (one node from a gap). */
export function coverage(nLayer: number, nodes: readonly NodeView[]): number[] {
  const hosts = new Array<number>(nLayer).fill(0);
  for (const n of nodes.filter(serving)) for (let l = n.start; l < Math.min(n.end, nLayer); l++) hosts[l]++;
  return hosts;
}

/** Runs of layers with the same host count, for drawing and for saying where the gaps are. */
export function runs(hosts: readonly number[]): Array<{ start: number; end: number; hosts: number }> {
  const out: Array<{ start: number; end: number; hosts: number }> = [];
  for (let l = 0; l < hosts.length; l++) {
    const last = out.at(-1);
    if (last && last.hosts === hosts[l]) last.end = l + 1;
    else out.push({ start: l, end: l + 1, hosts: hosts[l] });
  }
  return out;
}

export type Change =
  | { readonly kind: "joined"; readonly node: string; readonly layers: string }
  | { readonly kind: "moved"; readonly node: string; readonly from: string; readonly to: string }
  | { readonly kind: "left"; readonly node: string; readonly layers: string };

const layers = (n: NodeView) => `${n.start}:${n.end}`;

/** What changed between two looks: serving nodes that came, moved or went. */
export function changes(before: readonly NodeView[], after: readonly NodeView[]): Change[] {
  const was = new Map(before.filter(serving).map((n) => [n.node, n]));
  const now = new Map(after.filter(serving).map((n) => [n.node, n]));
  const out: Change[] = [];
  for (const [node, n] of now) {
    const b = was.get(node);
    if (!b) out.push({ kind: "joined", node, layers: layers(n) });
    else if (layers(b) !== layers(n)) out.push({ kind: "moved", node, from: layers(b), to: layers(n) });
  }
  for (const [node, b] of was) if (!now.has(node)) out.push({ kind: "left", node, layers: layers(b) });
  return out;
}
