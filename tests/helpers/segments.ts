// Helpers of the packed-sequence tests (CPU and GPU): rows of a row-major array, and per-segment
// results concatenated in segment order.

/** Rows [start, start + n) of x laid out (rows, width), as a copy. */
export const rowsOf = (x: Float32Array, width: number, start: number, n: number) =>
  x.slice(start * width, (start + n) * width);

/** Each segment's part of a per-segment result, concatenated in order. */
export function perSegment(lengths: number[], part: (start: number, n: number) => Float32Array): Float32Array {
  const parts: Float32Array[] = [];
  let start = 0;
  for (const n of lengths) {
    parts.push(part(start, n));
    start += n;
  }
  const out = new Float32Array(parts.reduce((a, p) => a + p.length, 0));
  let off = 0;
  for (const p of parts) {
    out.set(p, off);
    off += p.length;
  }
  return out;
}
