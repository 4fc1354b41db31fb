// Who a keyless client is, for limits: its IPv4 address, or its IPv6 /64 — one subscriber
// commonly holds a whole /64 and could take a new address per request.

/** The address group a client address belongs to: "1.2.3.4", or "2001:db8:0:1::/64". */
export function addressGroup(address: string): string {
  const a = address.replace(/^\[|\]$/g, "").replace(/%.*$/, "").toLowerCase();
  if (!a.includes(":")) return a;
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/.exec(a);
  if (mapped) return mapped[1];
  const hextets = expand(a);
  if (!hextets) return a; // not an IPv6 address: as it came
  return `${hextets.slice(0, 4).map((h) => h.replace(/^0+(?=.)/, "")).join(":")}::/64`;
}

/** The eight hextets of an IPv6 address (with "::" filled in), or undefined. */
function expand(a: string): string[] | undefined {
  const halves = a.split("::");
  if (halves.length > 2) return undefined;
  const part = (s: string) => (s === "" ? [] : s.split(":"));
  const head = part(halves[0]);
  const tail = halves.length === 2 ? part(halves[1]) : [];
  // an embedded IPv4 tail counts as two hextets
  const v4 = tail.length ? /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(tail[tail.length - 1]) : null;
  if (v4) {
    const [b0, b1, b2, b3] = v4.slice(1).map(Number);
    tail.splice(-1, 1, ((b0 << 8) | b1).toString(16), ((b2 << 8) | b3).toString(16));
  }
  const missing = 8 - head.length - tail.length;
  if (halves.length === 1 ? missing !== 0 : missing < 1) return undefined;
  const all = [...head, ...Array(halves.length === 2 ? missing : 0).fill("0"), ...tail];
  return all.every((h) => /^[0-9a-f]{1,4}$/.test(h)) ? all : undefined;
}
