// Tracker calls straight over TCP (calls-wire.ts): the same handlers, interceptors and errors
// as over Connect on HTTP/2, a fallback to HTTP/2 for a tracker without them, deadlines, lost
// connections moving to another replica, and bad input refused on the wire.
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { Code, ConnectError, type ConnectRouter } from "@connectrpc/connect";
import { afterEach, describe, expect, it } from "vitest";
import {
  NodesResponseSchema,
  NodeStateSchema,
  TrackerAnswerSchema,
  TrackerCallSchema,
  TrackerService,
} from "../../src/gen/strata/tracker/v1/tracker_pb.ts";
import { CALLS_ACCEPT, CALLS_LIMITS, CALLS_PREFACE, serveCalls } from "../../src/tracker/wire/calls-wire.ts";
import { MessageReader, sendMessage } from "../../src/seam/mux.ts";
import { type Http2Server, listenConnect } from "../../node-apis/http/http2.ts";
import { directAnswers, directCallsSide } from "../../server/tracker/direct-calls.ts";
import { trackerClient } from "../../node-apis/tracker/client.ts";
import { pair } from "../fakes/memory-duplex.ts";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A small TrackerService: Nodes names what it was asked about; Route refuses; Leave is slow;
 *  an interceptor counts calls and refuses a token. */
function service(seen: string[]) {
  return (router: ConnectRouter) =>
    router.service(TrackerService, {
      nodes: (req) =>
        create(NodesResponseSchema, { nodes: req.nodes.map((node) => create(NodeStateSchema, { node })) }),
      route: () => {
        throw new ConnectError("all routes are busy", Code.ResourceExhausted);
      },
      leave: async (req, ctx) => {
        await sleep(Number(req.node));
        return { known: !ctx.signal.aborted };
      },
    }, {
      interceptors: [(next) => async (req) => {
        seen.push(req.method.name);
        const token = (req.message as { token?: string }).token;
        if (token === "forged") throw new ConnectError("bad node token", Code.Unauthenticated);
        return await next(req);
      }],
    });
}

const servers: Http2Server[] = [];
const clients: Array<{ close(): void }> = [];
afterEach(async () => {
  for (const c of clients.splice(0)) c.close();
  for (const s of servers.splice(0)) await s.close();
});

/** A tracker-like server; with `direct`, it takes direct calls too (counted). */
async function serve(direct: boolean) {
  const seen: string[] = [];
  const routes = service(seen);
  let connections = 0;
  const side = directCallsSide(routes);
  const counted = {
    preface: side.preface,
    take: (...a: Parameters<typeof side.take>) => (connections++, side.take(...a)),
  };
  const s = await listenConnect(routes, "127.0.0.1", 0, direct ? counted : undefined, undefined, Infinity);
  servers.push(s);
  return { url: s.url, seen, connections: () => connections, server: s };
}

function client(url: string) {
  const c = trackerClient(url);
  clients.push(c);
  return c.client;
}

describe("direct tracker calls", () => {
  it("answer as Connect does, on one connection, with the handlers' errors and interceptors", async () => {
    const t = await serve(true);
    const c = client(t.url);
    const answers = await Promise.all(
      Array.from({ length: 50 }, (_, i) => c.nodes({ nodes: [`n${i}`, "x"] })),
    );
    expect(answers.map((a) => a.nodes.map((n) => n.node))).toEqual(
      Array.from({ length: 50 }, (_, i) => [`n${i}`, "x"]),
    );
    await expect(c.route({ sessionId: "s" })).rejects.toMatchObject({
      code: Code.ResourceExhausted,
      rawMessage: "all routes are busy",
    });
    await expect(c.heartbeat({ token: "forged", node: "a" })).rejects.toMatchObject({
      code: Code.Unauthenticated,
    });
    // a method the server does not implement
    await expect(c.register({ node: "a" })).rejects.toMatchObject({ code: Code.Unimplemented });
    expect(t.connections()).toBe(1);
    expect(t.seen.filter((m) => m === "Nodes").length).toBe(50);
  });

  it("keep a deadline, and a tracker's own deadline is the caller's", async () => {
    const t = await serve(true);
    const c = client(t.url);
    await expect(c.leave({ node: "500" }, { timeoutMs: 100 })).rejects.toMatchObject({
      code: Code.DeadlineExceeded,
    });
    expect((await c.leave({ node: "10" }, { timeoutMs: 5000 })).known).toBe(true);
  });

  it("fall back to Connect on HTTP/2 when the tracker does not take them", async () => {
    const t = await serve(false);
    const c = client(t.url);
    expect((await c.nodes({ nodes: ["a"] })).nodes[0].node).toBe("a");
    await expect(c.route({ sessionId: "s" })).rejects.toMatchObject({ code: Code.ResourceExhausted });
    expect(t.seen).toEqual(["Nodes", "Route"]);
  });

  it("move to the next replica when the connection is lost under a call, or refused", async () => {
    const a = await serve(true);
    const b = await serve(true);
    const c = client(`${a.url},${b.url}`);
    expect((await c.nodes({ nodes: ["first"] })).nodes.length).toBe(1);
    // a call under way when its replica goes
    const slow = c.leave({ node: "2000" }, { timeoutMs: 10_000 });
    await sleep(100);
    await a.server.close();
    servers.splice(servers.indexOf(a.server), 1);
    // (the call moved to b, which answered it)
    expect((await slow).known).toBe(true);
    expect((await c.nodes({ nodes: ["after"] })).nodes[0].node).toBe("after");
    expect(b.seen).toEqual(["Leave", "Nodes"]);
  });
});

describe("direct calls on the wire", () => {
  /** A connection served by serveCalls; the caller's end reads answers by channel. */
  function wire(answer: Parameters<typeof serveCalls>[2]) {
    const { client: c, server } = pair();
    let head = new Uint8Array(0);
    let taken = false;
    server.onData((chunk) => {
      if (taken) return;
      head = new Uint8Array([...head, ...chunk]);
      if (head.length < CALLS_PREFACE.length) return;
      taken = true;
      serveCalls(server, head.subarray(CALLS_PREFACE.length), answer);
    });
    const answers = new Map<number, { code: string; message: string }>();
    let accepted = 0;
    const reader = new MessageReader(
      (channel, _kind, body) => answers.set(channel, fromAnswer(body)),
      () => {},
    );
    c.onData((chunk) => {
      if (accepted < CALLS_ACCEPT.length) {
        const n = Math.min(CALLS_ACCEPT.length - accepted, chunk.length);
        accepted += n;
        chunk = chunk.subarray(n);
      }
      if (chunk.length) reader.push(chunk);
    });
    c.write([CALLS_PREFACE]);
    return { c, server, answers };
  }

  it("refuses what is no call, and calls past the limit, and keeps serving", async () => {
    const release: Array<() => void> = [];
    const { c, answers } = wire((call) =>
      new Promise((resolve) =>
        release.push(() => resolve(create(TrackerAnswerSchema, { errorCode: "", response: call.request })))
      )
    );
    sendMessage(c, 1, 1, new Uint8Array([0xff, 0xff, 0xff]));
    const call = toBinary(
      TrackerCallSchema,
      create(TrackerCallSchema, { method: "/x/Y", request: new Uint8Array(3) }),
    );
    for (let i = 0; i < CALLS_LIMITS.inFlight + 2; i++) sendMessage(c, 100 + i, 1, call);
    await sleep(50);
    expect(answers.get(1)).toEqual({ code: "invalid_argument", message: "not a tracker call" });
    const refused = [...answers].filter(([ch, a]) => ch >= 100 && a.code === "resource_exhausted");
    expect(refused.length).toBe(2);
    for (const r of release) r();
    await sleep(50);
    expect([...answers].filter(([ch, a]) => ch >= 100 && a.code === "").length).toBe(CALLS_LIMITS.inFlight);
  });

  it("refuses a request that does not parse before any interceptor sees it, and names the method", async () => {
    const seen: string[] = [];
    const { c, answers } = wire(directAnswers(service(seen)));
    const call = (request: Uint8Array) =>
      toBinary(
        TrackerCallSchema,
        create(TrackerCallSchema, { method: `/${TrackerService.typeName}/Nodes`, request }),
      );
    // field 1 (nodes, a string) claiming 100 bytes that are not there
    sendMessage(c, 1, 1, call(new Uint8Array([0x0a, 100, 0x61])));
    sendMessage(c, 2, 1, call(new Uint8Array([0x0a, 1, 0x61])));
    await sleep(50);
    expect(answers.get(1)?.code).toBe("invalid_argument");
    expect(answers.get(1)?.message).toMatch(/^malformed Nodes request/);
    expect(answers.get(2)?.code).toBe("");
    expect(seen).toEqual(["Nodes"]);
  });

  it("aborts the calls under way when the caller's connection ends", async () => {
    const aborted: boolean[] = [];
    const { c } = wire((_call, signal) =>
      new Promise((resolve) =>
        signal.addEventListener("abort", () => {
          aborted.push(true);
          resolve(create(TrackerAnswerSchema, {}));
        })
      )
    );
    const call = toBinary(TrackerCallSchema, create(TrackerCallSchema, { method: "/x/Y" }));
    for (let i = 1; i <= 3; i++) sendMessage(c, i, 1, call);
    await sleep(20);
    c.close();
    await sleep(20);
    expect(aborted.length).toBe(3);
  });
});

/** An answer's error, or "" for none. */
function fromAnswer(body: Uint8Array) {
  const a = fromBinary(TrackerAnswerSchema, body);
  return { code: a.errorCode, message: a.errorMessage };
}
