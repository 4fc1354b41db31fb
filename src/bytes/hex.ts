// Bytes ↔ lowercase hex (digests on the wire are bytes, in files and logs hex).
export const bytesToHex = (b: Uint8Array): string =>
  Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");

export function hexToBytes(h: string): Uint8Array {
  if (!/^(?:[0-9a-fA-F]{2})*$/.test(h)) throw new Error(`"${h.slice(0, 16)}…" is not hex`);
  return Uint8Array.from(h.match(/../g) ?? [], (x) => parseInt(x, 16));
}
