// CRC-32C (Castagnoli), the checksum of tensor bytes on seams. Eight bytes a step through
// eight tables ("slicing by 8"): the steps' table lookups do not wait on each other, so a
// prefill chunk's hidden states (tens of KB, checked on both sides of a seam) cost about a
// quarter of a byte-at-a-time loop.
const POLY = 0x82f63b78;
const TABLES = (() => {
  const t = new Uint32Array(8 * 256);
  for (let i = 0; i < 256; i++) {
    let c = i;
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ POLY : c >>> 1;
    t[i] = c >>> 0;
  }
  // table k: the CRC of a byte followed by k zero bytes
  for (let k = 1; k < 8; k++) {
    for (let i = 0; i < 256; i++) {
      const prev = t[(k - 1) * 256 + i];
      t[k * 256 + i] = (t[prev & 0xff] ^ (prev >>> 8)) >>> 0;
    }
  }
  return t;
})();

function update(c: number, p: Uint8Array): number {
  const t = TABLES;
  let i = 0;
  const end8 = p.length - (p.length & 7);
  for (; i < end8; i += 8) {
    const lo = c ^ (p[i] | (p[i + 1] << 8) | (p[i + 2] << 16) | (p[i + 3] << 24));
    c = t[1792 + (lo & 0xff)] ^ t[1536 + ((lo >>> 8) & 0xff)] ^ t[1280 + ((lo >>> 16) & 0xff)] ^
      t[1024 + (lo >>> 24)] ^ t[768 + p[i + 4]] ^ t[512 + p[i + 5]] ^ t[256 + p[i + 6]] ^ t[p[i + 7]];
  }
  for (; i < p.length; i++) c = t[(c ^ p[i]) & 0xff] ^ (c >>> 8);
  return c;
}

export function crc32c(...parts: Uint8Array[]): number {
  let c = 0xffffffff;
  for (const p of parts) c = update(c, p);
  return (c ^ 0xffffffff) >>> 0;
}
