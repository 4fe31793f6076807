/**
 * The shared WGSL snippets that kernels splice in with `// #include "name.wgsl"`
 * (wgsl_preprocess.ts), by file name: the sources live in ./shared/.
 */
import attentionLayout from './shared/attention_layout.wgsl?raw';
import embeddingGather from './shared/embedding_gather.wgsl?raw';
import grid from './shared/grid.wgsl?raw';
import matmulTile from './shared/matmul_tile.wgsl?raw';
import rmsnormRows from './shared/rmsnorm_rows.wgsl?raw';
import sampleCommon from './shared/sample_common.wgsl?raw';
import sampleTotals from './shared/sample_totals.wgsl?raw';
import sigmoid from './shared/sigmoid.wgsl?raw';
import swigluCommon from './shared/swiglu_common.wgsl?raw';
import wgSum from './shared/wg_sum.wgsl?raw';

export const WGSL_SNIPPETS: Readonly<Record<string, string>> = {
  'attention_layout.wgsl': attentionLayout,
  'embedding_gather.wgsl': embeddingGather,
  'grid.wgsl': grid,
  'matmul_tile.wgsl': matmulTile,
  'rmsnorm_rows.wgsl': rmsnormRows,
  'sample_common.wgsl': sampleCommon,
  'sample_totals.wgsl': sampleTotals,
  'sigmoid.wgsl': sigmoid,
  'swiglu_common.wgsl': swigluCommon,
  'wg_sum.wgsl': wgSum,
};
