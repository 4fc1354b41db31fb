// Which routes a request gets: every disjoint complete route, least loaded first, so
// independent requests spread over them; when there is none, why (busy or absent).
import { TrackerError } from "../errors.ts";
import { type Candidate, disjointRoutes, noRouteReason } from "./select.ts";

/** A route's load is its fullest node's (a node a repair keeps already counts the session). */
const routeLoad = (rt: readonly Candidate[]) => Math.max(...rt.map((c) => c.kept ? 0 : c.load));

const keptNodes = (rt: readonly Candidate[]) => rt.filter((c) => c.kept).length;
/** nodes of the route that hold the session's prompt prefix */
const preferredNodes = (rt: readonly Candidate[]) => rt.filter((c) => c.preferred).length;

/** Up to `count` (at least one) routes; a TrackerError when none is free. */
export function chooseRoutes(cands: readonly Candidate[], nLayer: number, count: number): Candidate[][] {
  const all = disjointRoutes(cands, nLayer, cands.length);
  // a repair's route keeps as many of the nodes that hold its session as it can; a new
  // session's goes through as many of those that hold its prompt's prefix (prefix affinity)
  all.sort((a, b) =>
    keptNodes(b) - keptNodes(a) || preferredNodes(b) - preferredNodes(a) || routeLoad(a) - routeLoad(b)
  );
  const chosen = all.slice(0, Math.max(1, count));
  if (chosen.length > 0) return chosen;
  // full is not absent: a gateway waits for a full route, and fails on no route
  if (noRouteReason(cands, nLayer) === "busy") {
    throw new TrackerError("resource_exhausted", "all routes are busy");
  }
  throw new TrackerError("unavailable", "no complete route of admitted, live nodes");
}
