// A loopback port nothing listens on now: for a server that must come back on the same port
// (a restarted tracker its nodes still dial), or a tool that wants the port before it starts.
export function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}
