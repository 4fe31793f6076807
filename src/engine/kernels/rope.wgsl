// rope: rotary position embedding on q or k, HF "rotate_half" convention: dim i pairs with
// i + D/2. For position p = pos0 + t and angle a = p * freqs[i] (rounded to f32, as HF does):
// (packed sequence, segmented = 1: p = pos0 + t - seg[2t], restarting at pos0 in each segment)
//   y[i]       = x[i] * cos(a) - x[i + D/2] * sin(a)
//   y[i + D/2] = x[i + D/2] * cos(a) + x[i] * sin(a)
// The backward is the same rotation by -a: run with sign = -1 on dy.
// Constants (overrides): WG = workgroup size (default 64).
// Dispatch: (H, T) workgroups; each invocation loops over pairs i = lid, lid + WG, ... < D/2.
// rope_append.wgsl reuses cosSin: it appends this file preprocessed with ROPE_KERNEL false.

// #if ROPE_KERNEL
override WG: u32 = 64u;

struct Params {
  T: u32,
  H: u32,
  D: u32,
  pos0: u32,
  sign: f32,      // +1 forward, -1 backward
  segmented: u32, // 1: seg holds each row's segment [start, end) (segments.ts); 0: seg is never read
}

@group(0) @binding(0) var<storage, read> x: array<f32>;       // (T, H, D)
@group(0) @binding(1) var<storage, read> freqs: array<f32>;   // (D/2,)
@group(0) @binding(2) var<storage, read_write> y: array<f32>; // (T, H, D)
@group(0) @binding(3) var<storage, read> seg: array<u32>;  // (T, 2)
@group(0) @binding(4) var<uniform> p: Params;
// #endif

// cos and sin of an angle, computed here rather than with the built-ins: WGSL only bounds their
// error by 2^-11 on [-pi, pi] (SwiftShader is off by ~2e-4) and not at all outside it.
// Reduction: a = k * pi/2 + r, |r| <= pi/4, with pi/2 = P1 + P2 + P3 where P1 (7 significant
// bits) and P2 (4 bits) make k * P1 and k * P2 exact in f32 for |k| < 2^17 (angles up to ~2e5,
// i.e. positions beyond 200k at the fastest frequency lose accuracy). Then Taylor polynomials on
// [-pi/4, pi/4] (truncation < 2e-9) and the quadrant k mod 4.
const P1: f32 = 1.578125;
const P2: f32 = -0.00732421875;
const P3: f32 = -4.4544551033807687e-6;
const TWO_OVER_PI: f32 = 0.6366197723675814;

fn cosSin(a: f32) -> vec2<f32> {
  let k = round(a * TWO_OVER_PI);
  let r = ((a - k * P1) - k * P2) - k * P3;
  let r2 = r * r;
  let s = r * (1.0 + r2 * (-1.0 / 6.0 + r2 * (1.0 / 120.0 + r2 * (-1.0 / 5040.0 + r2 * (1.0 / 362880.0)))));
  let c = 1.0 + r2 * (-0.5 + r2 * (1.0 / 24.0 + r2 * (-1.0 / 720.0 + r2 * (1.0 / 40320.0 + r2 * (-1.0 / 3628800.0)))));
  switch (u32(i32(k) & 3)) {
    case 0u: { return vec2<f32>(c, s); }
    case 1u: { return vec2<f32>(-s, c); }
    case 2u: { return vec2<f32>(-c, -s); }
    default: { return vec2<f32>(s, -c); }
  }
}

// #if ROPE_KERNEL
@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let h = wid.x;
  let t = wid.y;
  let half = p.D / 2u;
  let base = (t * p.H + h) * p.D;
  var start = 0u;
  if (p.segmented != 0u) {
    start = seg[2u * t];
  }
  let pos = f32(p.pos0 + t - start);
  for (var i = lid; i < half; i += WG) {
    let cs = cosSin(pos * freqs[i]);
    let c = cs.x;
    let s = p.sign * cs.y;
    let x1 = x[base + i];
    let x2 = x[base + i + half];
    y[base + i] = x1 * c - x2 * s;
    y[base + i + half] = x2 * c + x1 * s;
  }
}
// #endif
