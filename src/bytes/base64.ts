// Bytes ⇄ base64 with the web platform's atob/btoa (browsers, Deno and Node alike): how
// tensors cross page.evaluate, which only carries JSON.

export function toBase64(view: ArrayBufferView): string {
  const bytes = new Uint8Array(view.buffer, view.byteOffset, view.byteLength);
  let s = "";
  // String.fromCharCode takes its arguments on the stack: a chunk at a time
  for (let i = 0; i < bytes.length; i += 0x8000) {
    s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  }
  return btoa(s);
}

export function fromBase64(text: string): Uint8Array {
  const s = atob(text);
  const out = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) out[i] = s.charCodeAt(i);
  return out;
}

/** A copy with its own aligned buffer, as the typed array the caller names. */
export function f32FromBase64(text: string): Float32Array {
  return new Float32Array(fromBase64(text).buffer);
}

export function i32FromBase64(text: string): Int32Array {
  return new Int32Array(fromBase64(text).buffer);
}
