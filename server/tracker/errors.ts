// The core's TrackerErrors as Connect statuses, at the edge.
import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import { TrackerError, type TrackerErrorCode } from "../../src/tracker/errors.ts";

const CODES: Readonly<Record<TrackerErrorCode, Code>> = {
  invalid_argument: Code.InvalidArgument,
  failed_precondition: Code.FailedPrecondition,
  resource_exhausted: Code.ResourceExhausted,
  unavailable: Code.Unavailable,
  not_found: Code.NotFound,
  unauthenticated: Code.Unauthenticated,
};

/** A TrackerError as its ConnectError; anything else unchanged. */
export function toConnectError(e: unknown): unknown {
  return e instanceof TrackerError ? new ConnectError(e.message, CODES[e.code]) : e;
}

/** Maps what the handlers (and the interceptors inside this one) throw. */
export const trackerErrors: Interceptor = (next) => async (req) => {
  try {
    return await next(req);
  } catch (e) {
    throw toConnectError(e);
  }
};
