/** `spade gpu [--json]`: acquire a WebGPU device in Node and print its report and the kernel self-check. */
import { gpuSelfCheck } from '../engine/engine_api.ts';
import { acquireNodeGpu } from '../platform/node/gpu.ts';
import { JSON_FLAG, parseCommand, type CommandSpec, type Io } from './args.ts';

export const GPU: CommandSpec = {
  name: 'gpu',
  usage: '[--json]',
  summary: 'Report the WebGPU adapter Node sees and check one kernel against the CPU reference (exit 1 on a mismatch).',
  flags: { json: JSON_FLAG },
  example: 'spade gpu --json',
};

export async function run(argv: string[], io: Io): Promise<number> {
  const args = parseCommand(GPU, argv, io);
  if (!args) return 0;
  const ctx = await acquireNodeGpu();
  const check = await gpuSelfCheck(ctx);
  const r = ctx.report;
  ctx.destroy();
  if (args.flags.has('json')) {
    io.out(JSON.stringify({ ok: check.ok, report: r, selfCheck: check }));
  } else {
    io.out(`adapter     ${r.vendor} / ${r.architecture}${r.isFallback ? ' (software)' : ''}`);
    io.out(`shader-f16  ${r.features.shaderF16 ? 'yes' : 'no'}`);
    io.out(`max binding ${Math.round(r.limits.maxStorageBufferBindingSize / 2 ** 20)} MiB`);
    io.out(
      `self-check  ${check.ok ? 'the add kernel matches the CPU reference' : `MISMATCH (max error ${check.maxAbsError})`}`,
    );
  }
  return check.ok ? 0 : 1;
}
