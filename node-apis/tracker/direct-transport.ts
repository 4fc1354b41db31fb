// A Connect transport for tracker calls that goes direct (src/tracker/wire/calls-wire.ts) to a
// tracker that takes such calls, and over Connect on HTTP/2 (`fallback`) to one that does not.
// One connection per tracker, shared by every call; a lost connection fails its calls as
// Unavailable (so the client moves to another replica) and the next call connects afresh.
import { create, fromBinary, isMessage, toBinary } from "@bufbuild/protobuf";
import { Code, ConnectError, type Transport } from "@connectrpc/connect";
import { codeFromString } from "@connectrpc/connect/protocol-connect";
import { CallsClient, CallsError } from "../../src/tracker/wire/calls-wire.ts";
import { dialSide, SideDialError } from "../http/dial-side.ts";

/** How long a tracker that refused direct calls is left to HTTP/2 before it is asked again. */
const RETRY_DIRECT_MS = 60_000;

const CODES = {
  unavailable: Code.Unavailable,
  deadline_exceeded: Code.DeadlineExceeded,
  canceled: Code.Canceled,
} as const;

export function directTransport(baseUrl: string, fallback: Transport): Transport & { close(): void } {
  let conn: Promise<CallsClient | undefined> | undefined;
  /** counts connections made: a connection that ends forgets itself, not a newer one */
  let made = 0;
  let refusedAt = -Infinity;
  let closed = false;

  const connect = async (): Promise<CallsClient | undefined> => {
    const mine = ++made;
    let dialed;
    try {
      dialed = await dialSide(baseUrl);
    } catch (e) {
      conn = undefined;
      if (e instanceof SideDialError && e.reached) {
        refusedAt = Date.now();
        return undefined;
      }
      // not reachable at all: the caller moves to another replica
      throw new ConnectError(`tracker ${baseUrl}: ${e instanceof Error ? e.message : e}`, Code.Unavailable);
    }
    if (!dialed) return undefined;
    try {
      const c = await CallsClient.connect(dialed.duplex);
      dialed.duplex.onClose(() => {
        if (made === mine) conn = undefined;
      });
      return c;
    } catch (e) {
      conn = undefined;
      if (dialed.reached()) {
        // it answered, but not these calls: a tracker that takes Connect alone
        refusedAt = Date.now();
        return undefined;
      }
      throw new ConnectError(`tracker ${baseUrl}: ${e instanceof Error ? e.message : e}`, Code.Unavailable);
    }
  };

  const client = (): Promise<CallsClient | undefined> => {
    if (closed || Date.now() - refusedAt < RETRY_DIRECT_MS) return Promise.resolve(undefined);
    conn ??= connect();
    return conn;
  };

  return {
    async unary(method, signal, timeoutMs, header, input, contextValues) {
      let c = await client();
      if (c?.closed) {
        // it ended since: a fresh one
        conn = undefined;
        c = await client();
      }
      if (!c || c.closed) {
        return await fallback.unary(method, signal, timeoutMs, header, input, contextValues);
      }
      const message = isMessage(input, method.input) ? input : create(method.input, input);
      let answer;
      try {
        answer = await c.call(
          `/${method.parent.typeName}/${method.name}`,
          toBinary(method.input, message),
          timeoutMs,
          signal,
        );
      } catch (e) {
        if (e instanceof CallsError) throw new ConnectError(e.message, CODES[e.code]);
        throw e;
      }
      if (answer.errorCode) {
        throw new ConnectError(answer.errorMessage, codeFromString(answer.errorCode) ?? Code.Unknown);
      }
      return {
        stream: false as const,
        service: method.parent,
        method,
        header: new Headers(),
        message: fromBinary(method.output, answer.response),
        trailer: new Headers(),
      };
    },
    stream: (method, signal, timeoutMs, header, input, contextValues) =>
      fallback.stream(method, signal, timeoutMs, header, input, contextValues),
    close() {
      closed = true;
      void conn?.then((c) => c?.close(), () => {});
      conn = undefined;
    },
  };
}
