// Tracker errors: a code the edge maps to its own status (Connect at the tracker, HTTP at
// the gateway's volunteer API), with a message a person can act on.

export type TrackerErrorCode =
  | "invalid_argument" // a request missing what it needs, or out of range
  | "failed_precondition" // a request for another model artifact than the tracker routes
  | "resource_exhausted" // every route is full (wait and ask again), or a range too big for its engine
  | "unavailable" // no complete route of admitted, live nodes
  | "not_found" // an artifact the tracker does not know
  | "unauthenticated"; // a node token that is not the tracker's

export class TrackerError extends Error {
  override name = "TrackerError";
  constructor(readonly code: TrackerErrorCode, message: string) {
    super(message);
  }
}
