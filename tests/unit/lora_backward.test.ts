// The LoRA backward's work per layer (CPU references): the projections that share an input (q/k/v
// on the attention norm's output, gate/up on the MLP norm's) accumulate its gradient into one
// tensor, so a layer's backward adds only its two residuals — the gradients themselves are checked
// against finite differences in tests/unit/engine_model.test.ts.
import { describe, expect, it } from 'vitest';
import { loadCheckpoint } from '../../src/engine/io/load.ts';
import { MemoryModelFiles } from '../../src/engine/io/model_files.ts';
import type { LoraModule } from '../../src/engine/io/peft.ts';
import { LlamaModel } from '../../src/engine/model/model.ts';
import { CpuOps, type CpuTensor } from '../../src/engine/ops/ops.ts';
import { tinyCheckpointFiles } from '../helpers/tiny_checkpoint.ts';

const ALL: LoraModule[] = ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'];
const IDS = [5, 17, 99, 3, 250, 42, 7, 1];

/** CpuOps that counts the calls the backward makes. */
class CountingOps extends CpuOps {
  calls = { addInPlace: 0, matmul: 0, matmulAcc: 0 };
  override addInPlace(a: CpuTensor, b: CpuTensor, s?: number): void {
    this.calls.addInPlace++;
    super.addInPlace(a, b, s);
  }
  override matmul(...args: Parameters<CpuOps['matmul']>): CpuTensor {
    this.calls.matmul++;
    return super.matmul(...args);
  }
  override matmulAcc(...args: Parameters<CpuOps['matmulAcc']>): void {
    this.calls.matmulAcc++;
    super.matmulAcc(...args);
  }
}

describe('LoRA backward batched per layer', () => {
  it('sums the input gradient of q/k/v and of gate/up in place: two additions per layer (the residuals)', async () => {
    const ck = tinyCheckpointFiles('qwen2', 'f32', 0, { tokenizer: false });
    const l = await loadCheckpoint(new MemoryModelFiles(ck.files), { tokenizer: false });
    const ops = new CountingOps();
    const m = new LlamaModel<CpuTensor>(l.config, ops, l.weights);
    m.initLora(2, 4, ALL, 1);
    const tape = m.forwardHidden(IDS);
    const dhn = ops.upload([IDS.length, m.cfg.hiddenSize], new Float32Array(IDS.length * m.cfg.hiddenSize).fill(0.1));
    ops.calls = { addInPlace: 0, matmul: 0, matmulAcc: 0 };
    m.backwardHidden(tape, dhn);
    const L = m.cfg.numLayers;
    expect(ops.calls.addInPlace).toBe(2 * L);
    // per layer: dx of down, gate, o, q and dy·B of all seven are new tensors; the other three dx
    // accumulate, as do dB, dA and s·(dy·B)·A of all seven
    expect(ops.calls.matmul).toBe(11 * L);
    expect(ops.calls.matmulAcc).toBe((3 + 3 * 7) * L);
  });
});
