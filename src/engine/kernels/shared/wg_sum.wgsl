// wg_sum: the sum over a workgroup of one value per invocation, a tree in workgroup memory.
// The including kernel declares `override WG` (a power of two) and `alias SumT = f32;` (or a
// vector type, summed per component). Call it once per dispatch from uniform control flow; every
// invocation gets the total.

var<workgroup> wg_partial: array<SumT, WG>;

fn wg_sum(lid: u32, v: SumT) -> SumT {
  wg_partial[lid] = v;
  workgroupBarrier();
  for (var stride = WG / 2u; stride > 0u; stride >>= 1u) {
    if (lid < stride) {
      wg_partial[lid] += wg_partial[lid + stride];
    }
    workgroupBarrier();
  }
  return wg_partial[0];
}
