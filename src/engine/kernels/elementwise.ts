/**
 * elementwise: residual add (out = a + b), scale (out = a · s), add-in-place (a += b · s) and
 * place-columns (a (R, cols) + bias into a column block of out (R, width): the fused q|k|v layout
 * of a prefill step), one shader with an OP constant. All f32, any shape (flat over the elements).
 * Backward: add passes its upstream gradient to both inputs; scale multiplies it by s.
 */
import type { Engine, Tensor } from '../runtime/runtime.ts';
import { uniforms } from '../runtime/runtime.ts';
import { grid1d } from './dispatch_grid.ts';
import { wgslOnce } from './wgsl_preprocess.ts';
import shader from './elementwise.wgsl?raw';

const code = wgslOnce(shader, 'elementwise.wgsl');

const WG = 256;
const OP_ADD = 0;
const OP_SCALE = 1;
const OP_ADD_IN_PLACE = 2;
const OP_PLACE_COLUMNS = 3;

function check(name: string, ...ts: Tensor[]): void {
  for (const t of ts) if (t.dtype !== 'f32') throw new RangeError(`${name}: f32 tensors only, got ${t.dtype}`);
  for (const t of ts.slice(1)) {
    if (t.size !== ts[0]!.size) throw new RangeError(`${name}: size mismatch ${ts[0]!.size} vs ${t.size}`);
  }
}

function record(
  e: Engine,
  op: number,
  a: Tensor,
  b: Tensor,
  out: Tensor,
  s: number,
  place = { n: out.size, cols: 1, width: 1, off: 0, bias: 0 },
): void {
  if (place.n === 0) return;
  e.run({
    key: 'elementwise',
    code: code(),
    constants: { OP: op, WG },
    bindings: [a, b, out],
    uniforms: uniforms(
      { u32: place.n },
      { f32: s },
      { u32: place.cols },
      { u32: place.width },
      { u32: place.off },
      { u32: place.bias },
    ),
    workgroups: grid1d(Math.ceil(place.n / WG)),
  });
}

/** CPU reference. a, b: (N,) → a + b */
export function addCpu(a: Float32Array, b: Float32Array): Float32Array {
  if (a.length !== b.length) throw new RangeError(`add: size mismatch ${a.length} vs ${b.length}`);
  const out = new Float32Array(a.length);
  for (let i = 0; i < a.length; i++) out[i] = a[i]! + b[i]!;
  return out;
}

/** out = a + b (new tensor, a's shape). */
export function add(e: Engine, a: Tensor, b: Tensor): Tensor {
  check('add', a, b);
  const out = e.tensor(a.shape);
  record(e, OP_ADD, a, b, out, 0);
  return out;
}

/** CPU reference. a: (N,) → a · s */
export function scaleCpu(a: Float32Array, s: number): Float32Array {
  const out = new Float32Array(a.length);
  for (let i = 0; i < a.length; i++) out[i] = a[i]! * s;
  return out;
}

/** out = a · s (new tensor, a's shape). */
export function scale(e: Engine, a: Tensor, s: number): Tensor {
  check('scale', a);
  const out = e.tensor(a.shape);
  record(e, OP_SCALE, a, a, out, s);
  return out;
}

/** CPU reference, in place: a += b · s (returns a). */
export function addInPlaceCpu(a: Float32Array, b: Float32Array, s = 1): Float32Array {
  if (a.length !== b.length) throw new RangeError(`addInPlace: size mismatch ${a.length} vs ${b.length}`);
  for (let i = 0; i < a.length; i++) a[i] = Math.fround(a[i]! + b[i]! * s);
  return a;
}

/** a += b · s, in place on a's buffer (returns a). b must not share a's buffer. */
export function addInPlace(e: Engine, a: Tensor, b: Tensor, s = 1): Tensor {
  check('addInPlace', a, b);
  if (a.buffer === b.buffer) throw new RangeError('addInPlace: b must not alias a (use scale)');
  record(e, OP_ADD_IN_PLACE, b, b, a, s);
  return a;
}

/** CPU reference, in place: out[r, off + c] = a[r, c] (+ bias[c]) for a (R, cols), out (R, width). */
export function placeColumnsCpu(
  out: Float32Array,
  width: number,
  off: number,
  a: Float32Array,
  cols: number,
  bias?: Float32Array,
): Float32Array {
  for (let i = 0; i < a.length; i++) {
    const c = i % cols;
    out[Math.floor(i / cols) * width + off + c] = bias ? Math.fround(a[i]! + bias[c]!) : a[i]!;
  }
  return out;
}

/** out[:, off : off + cols] = a (+ bias) for a (R, cols) and out (R, width), in place on out. */
export function placeColumns(e: Engine, out: Tensor, off: number, a: Tensor, bias?: Tensor): Tensor {
  check('placeColumns', a);
  check('placeColumns', out);
  const R = a.shape[0]!;
  const cols = a.size / R;
  const width = out.size / R;
  if (!Number.isInteger(width) || off + cols > width || (bias && bias.size !== cols))
    throw new RangeError(
      `placeColumns: ${JSON.stringify(a.shape)} at column ${off} does not fit ${JSON.stringify(out.shape)}` +
        (bias ? ` with a bias of ${bias.size}` : ''),
    );
  record(e, OP_PLACE_COLUMNS, a, bias ?? a, out, 0, { n: a.size, cols, width, off, bias: bias ? 1 : 0 });
  return out;
}
