/**
 * Loading our engine's model from checkpoint directories in Node: a Hugging Face checkpoint (and
 * optionally a PEFT adapter) onto the GPU (`webgpu` package) or the CPU references, and the same
 * wrapped as the `local` ChatModel that `spade run`, `spade chat` and `spade engine` use.
 */
import { basename } from 'node:path';
import { UsageError } from '../../core/errors.ts';
import { loadCheckpoint, loadPeftAdapter } from '../../engine/io/load.ts';
import type { WeightFormat } from '../../engine/io/pack.ts';
import type { TextTokenizer } from '../../engine/io/tokenizer.ts';
import { LocalChatModel } from '../../engine/model/local_model.ts';
import { LlamaModel } from '../../engine/model/model.ts';
import { CpuOps, GpuOps, type Ops } from '../../engine/ops/ops.ts';
import { Engine } from '../../engine/runtime/runtime.ts';
import { acquireNodeGpu } from './gpu.ts';
import { DirModelFiles } from './model_files.ts';

/** Load a model (and adapter) from directories onto `device` ('gpu' or 'cpu'). */
export async function loadModelFromDir(
  dir: string,
  adapterDir: string | undefined,
  device: string,
  withTokenizer = false,
  weights: WeightFormat = 'f32',
): Promise<{ model: LlamaModel<unknown>; close: () => void; tokenizer: TextTokenizer | null }> {
  if (device !== 'gpu' && device !== 'cpu') throw new UsageError(`--device must be gpu or cpu; got "${device}"`);
  const ckpt = await loadCheckpoint(new DirModelFiles(dir), { tokenizer: withTokenizer });
  let ops: Ops<unknown>;
  let close = () => {};
  if (device === 'gpu') {
    const ctx = await acquireNodeGpu();
    ops = new GpuOps(new Engine(ctx));
    close = () => ctx.destroy();
  } else ops = new CpuOps();
  const model = new LlamaModel(ckpt.config, ops, ckpt.weights, { weights });
  if (adapterDir) model.setLora(await loadPeftAdapter(new DirModelFiles(adapterDir), { model: ckpt.config }));
  return { model, close, tokenizer: ckpt.tokenizer };
}

/** Our engine as the `local` ChatModel for `spade run` and `spade chat` (needs the checkpoint's tokenizer). */
export async function loadLocalChatModel(
  dir: string,
  adapterDir: string | undefined,
  device: string,
): Promise<LocalChatModel<unknown>> {
  const { model, tokenizer } = await loadModelFromDir(dir, adapterDir, device, true);
  if (!tokenizer) throw new UsageError(`${dir} has no tokenizer.json; the local backend needs it to chat`);
  return new LocalChatModel(basename(dir), model, tokenizer);
}
