// attention_layout: the contiguous attention layout shared by attention.wgsl (not paged) and its
// backward kernels: q (T, Hq, D) against k, v (S, Hkv, D) in bindings 0–2, and the sizes.
// segmented = 1: a packed sequence (S = T); each kernel also binds seg (T, 2), the [start, end)
// of each row's segment (segments.ts), and no row attends across a segment. segmented = 0: seg
// is bound but never read.

struct Params {
  T: u32,
  S: u32,
  Hq: u32,
  Hkv: u32,
  D: u32,
  scale: f32,
  segmented: u32,
}

@group(0) @binding(0) var<storage, read> q: array<f32>; // (T, Hq, D)
@group(0) @binding(1) var<storage, read> k: array<f32>; // (S, Hkv, D)
@group(0) @binding(2) var<storage, read> v: array<f32>; // (S, Hkv, D)
