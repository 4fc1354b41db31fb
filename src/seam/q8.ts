// Per-row int8 activation transport: each row keeps its own scale (max |x| / 127), so a
// row with a large outlier channel does not flatten the others. Error per element is at
// most half a step: scale / 2.

export interface Q8Rows {
  readonly values: Int8Array;
  readonly scales: Float32Array;
}

export function quantizeRows(x: Float32Array, rows: number, cols: number): Q8Rows {
  const values = new Int8Array(rows * cols);
  const scales = new Float32Array(rows);
  for (let r = 0; r < rows; r++) {
    const o = r * cols;
    let max = 0;
    for (let c = 0; c < cols; c++) max = Math.max(max, Math.abs(x[o + c]));
    const scale = max / 127;
    scales[r] = scale;
    if (scale === 0) continue;
    for (let c = 0; c < cols; c++) values[o + c] = Math.round(x[o + c] / scale);
  }
  return { values, scales };
}

/** Elements sharing one scale under block quantization. */
export const Q8_BLOCK = 32;

/** Scales one block of a row at a time: blocks per row = ceil(cols / Q8_BLOCK). */
export function quantizeBlocks(x: Float32Array, rows: number, cols: number): Q8Rows {
  const per = Math.ceil(cols / Q8_BLOCK);
  const values = new Int8Array(rows * cols);
  const scales = new Float32Array(rows * per);
  for (let r = 0; r < rows; r++) {
    for (let b = 0; b < per; b++) {
      const from = r * cols + b * Q8_BLOCK, to = r * cols + Math.min(cols, (b + 1) * Q8_BLOCK);
      let max = 0;
      for (let i = from; i < to; i++) max = Math.max(max, Math.abs(x[i]));
      const scale = max / 127;
      scales[r * per + b] = scale;
      if (scale === 0) continue;
      for (let i = from; i < to; i++) values[i] = Math.round(x[i] / scale);
    }
  }
  return { values, scales };
}

export function dequantizeBlocks(q: Q8Rows, rows: number, cols: number): Float32Array {
  const per = Math.ceil(cols / Q8_BLOCK);
  const out = new Float32Array(rows * cols);
  for (let r = 0; r < rows; r++) {
    for (let b = 0; b < per; b++) {
      const s = q.scales[r * per + b];
      const from = r * cols + b * Q8_BLOCK, to = r * cols + Math.min(cols, (b + 1) * Q8_BLOCK);
      for (let i = from; i < to; i++) out[i] = q.values[i] * s;
    }
  }
  return out;
}

export function dequantizeRows(q: Q8Rows, rows: number, cols: number): Float32Array {
  const out = new Float32Array(rows * cols);
  for (let r = 0; r < rows; r++) {
    const o = r * cols;
    const s = q.scales[r];
    for (let c = 0; c < cols; c++) out[o + c] = q.values[o + c] * s;
  }
  return out;
}
