/**
 * The LoRA-gradient comparison the GPU model tests share: the same random adapter (rank 2 on all
 * seven projections, B non-zero) on a CPU and a GPU model, one weighted-NLL backward over `ids`,
 * and the gradients of both read back per adapter key.
 */
import { createRng } from '../../src/core/rng.ts';
import type { LoraModule } from '../../src/engine/io/peft.ts';
import type { LlamaModel } from '../../src/engine/model/model.ts';
import type { CpuTensor } from '../../src/engine/ops/ops.ts';

export const ALL_TARGETS: LoraModule[] = ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'];

export async function loraGradients<G>(
  cpu: LlamaModel<CpuTensor>,
  gpu: LlamaModel<G>,
  ids: number[],
): Promise<{ want: Map<string, Float32Array>; got: Map<string, Float32Array> }> {
  cpu.initLora(2, 4, ALL_TARGETS, 1);
  const rng = createRng(4);
  for (const [key, t] of cpu.lora!.w)
    if (key.endsWith('.B')) for (let i = 0; i < t.data.length; i++) t.data[i] = (rng.next() - 0.5) * 0.2;
  gpu.setLora((await cpu.getLora())!);
  const input = ids.slice(0, -1);
  const tg = ids.slice(1);
  const w = Float32Array.from(tg, (_, i) => (i % 3 ? 0.5 : -1));
  const run = async <X>(m: LlamaModel<X>) => {
    const { logits, tape } = m.forward(input, { tape: true });
    const r = m.ops.nll(logits, tg, w);
    const grads = m.backward(tape!, m.ops.nllBackward(logits, tg, w, r.lse));
    const out = new Map<string, Float32Array>();
    for (const [k, x] of grads) out.set(k, Float32Array.from(await m.ops.read(x)));
    return out;
  };
  return { want: await run(cpu), got: await run(gpu) };
}
