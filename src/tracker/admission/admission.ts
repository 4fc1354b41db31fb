// Capability admission as the tracker books it: a node registers "pending", a probe runs
// against it, and the verdict makes it "admitted" or "refused: why". How the probe reaches
// the node is the runtime's business (a seam dialer and a reference engine).
import type { ProbeVerdict } from "./probe.ts";

export type Admission = "pending" | "admitted" | `refused: ${string}`;

/** What a probe needs to know about the node it tests. */
export interface ProbeTarget {
  readonly node: string;
  readonly url: string;
  readonly range: { readonly start: number; readonly end: number };
  readonly engine: string;
  readonly artifact: Uint8Array;
  /** a route epoch from the tracker's own sequence (spot checks look like any route) */
  readonly epoch?: bigint;
}

/** Runs the probe on one node; `routeKey` signs the probe's ticket. Never meant to throw. */
export type Probe = (target: ProbeTarget, routeKey: CryptoKey) => Promise<ProbeVerdict>;

export function admissionOf(v: ProbeVerdict): Admission {
  return v.ok ? "admitted" : `refused: ${v.detail}`;
}

/** A stored admission back as the type (anything unknown reads as refused, never admitted). */
export function parseAdmission(text: string): Admission {
  if (text === "pending" || text === "admitted" || text.startsWith("refused: ")) return text as Admission;
  return `refused: ${text}`;
}
