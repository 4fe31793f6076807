// sample_compact: pass 3 (filtered sampling) — writes each row's candidates (logit bits, id),
// the logits with g(l) ≥ info[row] (sample_select), in id order: a chunk starts after the
// candidates of the chunks before it (sample_select counted them), and its
// threads take contiguous ranges, placed by an exclusive prefix over the workgroup. Candidates
// past CAP are dropped (the final kernel then scans the whole row). Dispatch: (NC, B).

// #include "sample_common.wgsl"

@group(0) @binding(0) var<storage, read> logits: array<f32>;     // (B, V)
@group(0) @binding(1) var<storage, read> info: array<u32>;       // (B,) candidate grid threshold (i32 bits)
@group(0) @binding(2) var<storage, read> ccount: array<u32>;     // (B, NC)
@group(0) @binding(3) var<storage, read_write> cand: array<u32>; // (B, CAP, 2) [logit bits, id]
@group(0) @binding(4) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let c = wid.x;
  let row = wid.y;
  var o = 0u;
  for (var j = lid; j < c; j += WG) {
    o += ccount[row * p.NC + j];
  }
  let off = reduce_sum_u(lid, o);
  if (off >= p.CAP) {
    return; // uniform: the row overflows, the final kernel reads the logits instead
  }
  let thr = bitcast<i32>(info[row]);
  let base = row * p.V;
  let per = CHUNK / WG;
  let start = min(c * CHUNK + lid * per, p.V);
  let end = min(start + per, p.V);
  var n = 0u;
  for (var i = start; i < end; i++) {
    if (grid_of(logits[base + i]) >= thr) {
      n += 1u;
    }
  }
  workgroupBarrier();
  red_u[lid] = n;
  workgroupBarrier();
  var slot = off;
  for (var t = 0u; t < lid; t++) {
    slot += red_u[t];
  }
  for (var i = start; i < end; i++) {
    let l = logits[base + i];
    if (grid_of(l) >= thr) {
      if (slot < p.CAP) {
        let w = (row * p.CAP + slot) * 2u;
        cand[w] = bitcast<u32>(l);
        cand[w + 1u] = i;
      }
      slot += 1u;
    }
  }
}
