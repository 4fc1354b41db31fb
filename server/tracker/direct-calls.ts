// The tracker's end of direct calls (src/tracker/wire/calls-wire.ts): a call goes to the same
// service implementation and interceptors that serve it over HTTP/2, called as a function.
// Going through Connect's HTTP handler in memory instead (headers, body streams, an envelope,
// a JSON error body) cost more than the call's own work and most of its garbage.
import { create, type DescMethod, type DescService, fromBinary, toBinary } from "@bufbuild/protobuf";
import {
  Code,
  ConnectError,
  type ConnectRouter,
  createHandlerContext,
  createServiceImplSpec,
  type Interceptor,
  type MethodImpl,
  type ServiceImpl,
  type UnaryRequest,
  type UnaryResponse,
} from "@connectrpc/connect";
import { codeToString } from "@connectrpc/connect/protocol-connect";
import { TrackerAnswerSchema } from "../../src/gen/strata/tracker/v1/tracker_pb.ts";
import { type AnswerCall, CALLS_PREFACE, refusal, serveCalls } from "../../src/tracker/wire/calls-wire.ts";
import type { SideProtocol } from "../../node-apis/http/http2.ts";

/** One unary method as registered: where it is, what runs it, what wraps it. */
interface Unary {
  readonly service: DescService;
  readonly method: DescMethod & { methodKind: "unary" };
  readonly impl: (request: unknown, ctx: ReturnType<typeof createHandlerContext>) => unknown;
  readonly interceptors: readonly Interceptor[];
}

/** A router that keeps what `routes` registers, by request path, instead of serving HTTP. */
function registered(routes: (router: ConnectRouter) => void): Map<string, Unary> {
  const found = new Map<string, Unary>();
  const take = (
    service: DescService,
    method: DescMethod,
    impl: unknown,
    interceptors: readonly Interceptor[],
  ) => {
    if (method.methodKind !== "unary") return;
    found.set(`/${service.typeName}/${method.name}`, {
      service,
      method: method as Unary["method"],
      impl: impl as Unary["impl"],
      interceptors,
    });
  };
  const router: ConnectRouter = {
    handlers: [],
    service<T extends DescService>(
      service: T,
      implementation: Partial<ServiceImpl<T>>,
      options?: { interceptors?: Interceptor[] },
    ) {
      // methods left out answer `unimplemented`, as Connect's router does
      const spec = createServiceImplSpec(service, implementation);
      for (const m of Object.values(spec.methods)) {
        take(service, m.method, m.impl, options?.interceptors ?? []);
      }
      return router;
    },
    rpc<M extends DescMethod>(method: M, impl: MethodImpl<M>, options?: { interceptors?: Interceptor[] }) {
      take(method.parent, method, impl, options?.interceptors ?? []);
      return router;
    },
  };
  routes(router);
  return found;
}

/** The tracker port's side protocol: direct calls to the services `routes` registers. */
export function directCallsSide(routes: (router: ConnectRouter) => void): SideProtocol {
  const answer = directAnswers(routes);
  return { preface: CALLS_PREFACE, take: (duplex, head) => serveCalls(duplex, head, answer) };
}

/** Answers each call with the service `routes` registers for its method. */
export function directAnswers(routes: (router: ConnectRouter) => void): AnswerCall {
  const methods = registered(routes);
  return async (call, signal) => {
    const m = methods.get(call.method);
    if (!m) return refusal("unimplemented", `no method ${call.method}`);
    let message;
    try {
      message = fromBinary(m.method.input, call.request);
    } catch (e) {
      return refusal(
        "invalid_argument",
        `malformed ${m.method.name} request: ${e instanceof Error ? e.message : e}`,
      );
    }
    const url = `direct://tracker${call.method}`;
    // the caller's deadline is the handler's, and the call ends with its connection
    const ctx = createHandlerContext({
      service: m.service,
      method: m.method,
      protocolName: "strata-direct",
      requestMethod: "POST",
      url,
      timeoutMs: call.timeoutMs > 0 ? call.timeoutMs : undefined,
      requestSignal: signal,
    });
    const run = async (req: UnaryRequest): Promise<UnaryResponse> => ({
      stream: false,
      service: m.service,
      method: m.method,
      header: ctx.responseHeader,
      trailer: ctx.responseTrailer,
      message: create(m.method.output, await m.impl(req.message, ctx) as never),
    });
    // the first interceptor is the outermost, as in Connect
    const chain = m.interceptors.reduceRight((next, i) => i(next), run as Parameters<Interceptor>[0]);
    try {
      const res = await chain({
        stream: false,
        service: m.service,
        method: m.method,
        requestMethod: "POST",
        url,
        signal: ctx.signal,
        header: ctx.requestHeader,
        contextValues: ctx.values,
        message,
      });
      if (res.stream) return refusal("internal", `${m.method.name} answered with a stream`);
      return create(TrackerAnswerSchema, { response: toBinary(m.method.output, res.message) });
    } catch (e) {
      const err = ConnectError.from(e, Code.Internal);
      return refusal(codeToString(err.code), err.rawMessage);
    } finally {
      ctx.abort();
    }
  };
}
