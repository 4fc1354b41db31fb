// The tracker's end of direct calls (src/tracker/calls-wire.ts): a call is handed to the same
// Connect handlers, interceptors included, that serve it over HTTP/2, as a Connect unary
// request made in memory, and the handler's answer or error goes back in one message.
import { create } from "@bufbuild/protobuf";
import { type ConnectRouter, createConnectRouter } from "@connectrpc/connect";
import { TrackerAnswerSchema } from "../../src/gen/strata/tracker/v1/tracker_pb.ts";
import { concatBytes } from "../../src/bytes/concat.ts";
import { MAX_FRAME_BYTES } from "../../src/seam/limits.ts";
import { type AnswerCall, CALLS_PREFACE, refusal, serveCalls } from "../../src/tracker/calls-wire.ts";
import type { SideProtocol } from "../http/http2.ts";

async function* once(bytes: Uint8Array): AsyncIterable<Uint8Array> {
  yield bytes;
}

async function readAll(body: AsyncIterable<Uint8Array> | undefined): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  for await (const p of body ?? []) parts.push(p);
  return concatBytes(parts);
}

/** The tracker port's side protocol: direct calls to the services `routes` registers. */
export function directCallsSide(routes: (router: ConnectRouter) => void): SideProtocol {
  const router = createConnectRouter({ readMaxBytes: MAX_FRAME_BYTES, writeMaxBytes: MAX_FRAME_BYTES });
  routes(router);
  const handlers = new Map(router.handlers.map((h) => [h.requestPath, h]));
  const answer: AnswerCall = async (call, signal) => {
    const handle = handlers.get(call.method);
    if (!handle) return refusal("unimplemented", `no method ${call.method}`);
    const header = new Headers({ "content-type": "application/proto", "connect-protocol-version": "1" });
    if (call.timeoutMs > 0) header.set("connect-timeout-ms", String(call.timeoutMs));
    const res = await handle({
      httpVersion: "2.0",
      method: "POST",
      url: `http://tracker${call.method}`,
      header,
      body: once(call.request),
      signal,
    });
    const body = await readAll(res.body);
    if (res.status === 200) return create(TrackerAnswerSchema, { response: body });
    // a Connect error's body: {"code": "...", "message": "..."}
    try {
      const e = JSON.parse(new TextDecoder().decode(body));
      return refusal(String(e.code ?? "unknown"), String(e.message ?? ""));
    } catch {
      return refusal("unknown", `HTTP ${res.status}`);
    }
  };
  return { preface: CALLS_PREFACE, take: (duplex, head) => serveCalls(duplex, head, answer) };
}
