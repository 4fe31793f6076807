// Writes .dev/ref/: a tiny random checkpoint per architecture variant (f32), the token ids used,
// our engine's logits for them on the CPU references (every position), a LoRA adapter in PEFT
// format with non-zero B, and our logits with that adapter. scripts/device/check.py compares all of
// it with Hugging Face transformers and PEFT on a machine that has them.
//   node --import ./bin/ts_loader.js scripts/device/make_refs.ts
import { mkdirSync, writeFileSync } from 'node:fs';
import { createRng } from '../../src/core/rng.ts';
import { loadCheckpoint } from '../../src/engine/io/load.ts';
import { MemoryModelFiles } from '../../src/engine/io/model_files.ts';
import { exportPeft } from '../../src/engine/io/peft.ts';
import { LlamaModel } from '../../src/engine/model/model.ts';
import { CpuOps, type CpuTensor } from '../../src/engine/ops/ops.ts';
import { writeModelFiles } from '../../src/platform/node/model_files.ts';
import { TINY_VARIANTS, tinyCheckpointFiles } from '../../tests/helpers/tiny_checkpoint.ts';

const root = new URL('../../.dev/ref/', import.meta.url).pathname;
const tokens = [5, 17, 99, 3, 250, 42, 7, 1, 64, 200, 11];
mkdirSync(root, { recursive: true });
writeFileSync(`${root}tokens.txt`, tokens.join(','));
for (const variant of TINY_VARIANTS) {
  const dir = `${root}${variant}/`;
  const ck = tinyCheckpointFiles(variant, 'f32', 7, { tokenizer: false });
  await writeModelFiles(dir, ck.files);
  const loaded = await loadCheckpoint(new MemoryModelFiles(ck.files), { tokenizer: false });
  const m = new LlamaModel<CpuTensor>(loaded.config, new CpuOps(), loaded.weights);
  writeFileSync(`${dir}our_logits.json`, JSON.stringify(Array.from(m.forward(tokens).logits.data)));
  m.initLora(4, 8, ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'], 11);
  const rng = createRng(12);
  for (const [key, t] of m.lora!.w)
    if (key.endsWith('.B')) for (let i = 0; i < t.data.length; i++) t.data[i] = (rng.next() - 0.5) * 0.5;
  const files = exportPeft((await m.getLora())!, { baseModel: `tiny-${variant}` });
  mkdirSync(`${dir}adapter`, { recursive: true });
  writeFileSync(`${dir}adapter/adapter_config.json`, files.adapterConfigJson);
  writeFileSync(`${dir}adapter/adapter_model.safetensors`, files.weights);
  writeFileSync(`${dir}our_logits_adapter.json`, JSON.stringify(Array.from(m.forward(tokens).logits.data)));
  console.log(`${variant}: written`);
}
