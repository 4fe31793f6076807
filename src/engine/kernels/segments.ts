/**
 * segments: a sequence packed from several independent ones (a training minibatch run as one
 * forward). Each row knows the bounds of its segment, so attention stays inside it and RoPE
 * positions restart at 0 in each: bounds (T, 2) = [start, end) of the row's segment, as u32 on
 * the GPU (attention.ts, rope.ts) and as plain numbers in the CPU references.
 */

/** Bounds (T, 2) of each row of a sequence packed from segments of `lengths` (each ≥ 1), T = Σ lengths. */
export function segmentBounds(lengths: readonly number[]): Uint32Array {
  if (lengths.length === 0) throw new RangeError('segments: a packed sequence needs at least one segment');
  let T = 0;
  for (const n of lengths) {
    if (!Number.isInteger(n) || n < 1)
      throw new RangeError(`segments: a segment length must be a whole number ≥ 1, got ${n}`);
    T += n;
  }
  const out = new Uint32Array(2 * T);
  let start = 0;
  for (const n of lengths) {
    for (let t = start; t < start + n; t++) {
      out[2 * t] = start;
      out[2 * t + 1] = start + n;
    }
    start += n;
  }
  return out;
}

/** Checks that `bounds` has the (T, 2) bounds of T rows (`what` names the kernel in the message). */
export function checkBounds(what: string, bounds: ArrayLike<number>, T: number): void {
  if (bounds.length !== 2 * T)
    throw new RangeError(
      `${what}: segment bounds have ${bounds.length} values, expected 2·T = ${2 * T} (segmentBounds)`,
    );
}
