/**
 * swiglu: the gated MLP activation, out = silu(gate) * up elementwise on (T, F) (any shape, as
 * long as gate and up match). Backward gives dgate and dup from dout. f32 tensors only.
 */
import { uniforms, type Engine, type Tensor } from '../runtime/runtime.ts';
import { grid1d } from './dispatch_grid.ts';
import shader from './swiglu.wgsl?raw';
import backwardShader from './swiglu_backward.wgsl?raw';
import { wgslOnce } from './wgsl_preprocess.ts';

const code = wgslOnce(shader, 'swiglu.wgsl');
const backwardCode = wgslOnce(backwardShader, 'swiglu_backward.wgsl');

const WG = 256;

const sigmoid = (g: number) => (g >= 0 ? 1 / (1 + Math.exp(-g)) : Math.exp(g) / (1 + Math.exp(g)));

function check(...ts: Tensor[]): void {
  for (const t of ts) {
    if (t.dtype !== 'f32') throw new TypeError(`swiglu: f32 tensors only, got ${t.dtype}`);
    if (t.size !== ts[0]!.size) throw new RangeError(`swiglu: size mismatch ${ts[0]!.size} vs ${t.size}`);
  }
}

/** CPU reference. gate, up: (T, F) → (T, F). */
export function swigluCpu(gate: Float32Array, up: Float32Array): Float32Array {
  if (gate.length !== up.length) throw new RangeError(`swiglu: size mismatch ${gate.length} vs ${up.length}`);
  const out = new Float32Array(gate.length);
  for (let i = 0; i < gate.length; i++) out[i] = gate[i]! * sigmoid(gate[i]!) * up[i]!;
  return out;
}

/** CPU reference of the backward. gate, up, dout: (T, F) → dgate, dup: (T, F). */
export function swigluBackwardCpu(
  gate: Float32Array,
  up: Float32Array,
  dout: Float32Array,
): { dgate: Float32Array; dup: Float32Array } {
  if (gate.length !== up.length || gate.length !== dout.length) {
    throw new RangeError(`swiglu: size mismatch ${gate.length}, ${up.length}, ${dout.length}`);
  }
  const dgate = new Float32Array(gate.length);
  const dup = new Float32Array(gate.length);
  for (let i = 0; i < gate.length; i++) {
    const g = gate[i]!;
    const s = sigmoid(g);
    dgate[i] = dout[i]! * up[i]! * s * (1 + g * (1 - s));
    dup[i] = dout[i]! * g * s;
  }
  return { dgate, dup };
}

/** GPU forward, recorded on `e`. gate, up: (T, F) → (T, F) with gate's shape. */
export function swiglu(e: Engine, gate: Tensor, up: Tensor): Tensor {
  check(gate, up);
  const out = e.tensor(gate.shape);
  e.run({
    key: 'swiglu',
    code: code(),
    constants: { WG },
    bindings: [gate, up, out],
    uniforms: uniforms({ u32: gate.size }),
    workgroups: grid1d(Math.ceil(gate.size / WG)),
  });
  return out;
}

/** GPU backward, recorded on `e`. gate, up, dout: (T, F) → dgate, dup: (T, F). */
export function swigluBackward(e: Engine, gate: Tensor, up: Tensor, dout: Tensor): { dgate: Tensor; dup: Tensor } {
  check(gate, up, dout);
  const dgate = e.tensor(gate.shape);
  const dup = e.tensor(gate.shape);
  e.run({
    key: 'swiglu_backward',
    code: backwardCode(),
    constants: { WG },
    bindings: [gate, up, dout, dgate, dup],
    uniforms: uniforms({ u32: gate.size }),
    workgroups: grid1d(Math.ceil(gate.size / WG)),
  });
  return { dgate, dup };
}
