/**
 * Training from the command line (engine/tiny/toy_train.ts; docs/training.md):
 *   spade train toy [--json] [--seed S] [--updates N] [--device cpu|gpu]
 *     the learning proof: a tiny fresh model learns "Lucky Digit" through the app's path (engine
 *     sampling → QuickJS sandbox → GRPO update); one line per update (update, mean return, loss,
 *     clip fraction); with --json the last line is {"returnFirst","returnLast","updates","seconds"}.
 *     Exit 1 when the last return is below 0.8 (the proof failed).
 *   spade bench train [--json] [--updates N] [--device cpu|gpu]
 *     training tokens/s on the toy and the share of each cycle spent generating vs training.
 */
import { UsageError } from '../core/errors.ts';
import { computeOps, toyTrain, type Ops, type ToyUpdate } from '../engine/engine_api.ts';
import { acquireNodeGpu } from '../platform/node/gpu.ts';
import {
  flag,
  intFlag,
  JSON_FLAG,
  parseCommand,
  pickSubcommand,
  type Args,
  type CommandSpec,
  type Io,
} from './args.ts';

/** The proof's bar: the toy's last mean return must reach this. */
const TOY_TARGET = 0.8;

async function backend(a: Args): Promise<{ ops: Ops<unknown>; close: () => void; device: string }> {
  const device = flag(a, 'device');
  if (device === 'cpu') return { ops: computeOps('cpu'), close: () => {}, device };
  if (device !== 'gpu') throw new UsageError(`--device must be cpu or gpu; got "${device}"`);
  const ctx = await acquireNodeGpu();
  return { ops: computeOps(ctx), close: () => ctx.destroy(), device };
}

function positive(a: Args, name: string): number {
  const n = intFlag(a, name);
  if (n < 1) throw new UsageError(`--${name} must be at least 1; got ${n}`);
  return n;
}

const line = (u: ToyUpdate) =>
  `update ${String(u.update).padStart(2)}  return ${u.meanReturn.toFixed(3)}  loss ${u.loss.toFixed(4).padStart(7)}  ` +
  `clip ${u.clipFraction.toFixed(3)}  steps ${u.steps}  (${((u.generateMs + u.trainMs) / 1000).toFixed(1)} s)`;

const TRAIN_TOY: CommandSpec = {
  name: 'train toy',
  usage: '[flags]',
  summary:
    'The learning proof: a tiny fresh model learns "Lucky Digit" through the app\'s path (engine sampling,\n' +
    `QuickJS sandbox, GRPO update), one line per update. Exit 1 when the last mean return is below ${TOY_TARGET}.`,
  flags: {
    seed: { value: 'S', help: "the model's initialisation and the sampling", default: 1 },
    updates: { value: 'N', help: 'GRPO updates', default: 8 },
    device: { value: 'cpu|gpu', help: "the engine's CPU references or WebGPU", default: 'cpu' },
    json: JSON_FLAG,
  },
  example: 'spade train toy --updates 8 --json',
};

export async function train(argv: string[], io: Io): Promise<number> {
  const picked = pickSubcommand(
    { name: 'train', summary: 'Training from the command line (docs/training.md).', subcommands: [TRAIN_TOY] },
    argv,
    io,
  );
  if (!picked) return 0;
  const a = parseCommand(picked.spec, picked.rest, io);
  if (!a) return 0;
  const { ops, close, device } = await backend(a);
  try {
    const r = await toyTrain({
      seed: intFlag(a, 'seed'),
      updates: positive(a, 'updates'),
      ops,
      onUpdate: (u) => io.out(line(u)),
    });
    const summary = {
      ok: r.returnLast >= TOY_TARGET,
      returnFirst: r.returnFirst,
      returnLast: r.returnLast,
      updates: r.updates,
      seconds: Math.round(r.seconds * 10) / 10,
      device,
    };
    if (a.flags.has('json')) io.out(JSON.stringify(summary));
    else
      io.out(
        `mean return ${r.returnFirst.toFixed(2)} → ${r.returnLast.toFixed(2)} in ${r.updates} updates, ` +
          `${summary.seconds} s on ${device}${summary.ok ? '' : ` (below ${TOY_TARGET}: not learned)`}`,
      );
    return summary.ok ? 0 : 1;
  } finally {
    close();
  }
}

/** `spade bench train`: the toy's first updates (they all train), timed. */
export async function benchTrain(io: Io, a: Args): Promise<number> {
  const { ops, close, device } = await backend(a);
  try {
    const r = await toyTrain({ seed: 1, updates: positive(a, 'updates'), ops });
    const trainMs = r.curve.reduce((s, u) => s + u.trainMs, 0);
    const genMs = r.curve.reduce((s, u) => s + u.generateMs, 0);
    const tokens = r.curve.reduce((s, u) => s + u.trainTokens, 0);
    const plays = r.curve.length * 16;
    const out = {
      ok: true,
      device,
      updates: r.updates,
      trainTokens: tokens,
      trainTokensPerSecond: trainMs > 0 ? Math.round((tokens / trainMs) * 1000) : 0,
      generateShare: Math.round((genMs / (genMs + trainMs)) * 1000) / 1000,
      trainShare: Math.round((trainMs / (genMs + trainMs)) * 1000) / 1000,
      msPerPlay: Math.round(genMs / plays),
      seconds: Math.round(r.seconds * 10) / 10,
    };
    if (a.flags.has('json')) io.out(JSON.stringify(out));
    else {
      io.out(`toy GRPO on ${device}, ${out.updates} updates (${plays} plays of Lucky Digit)`);
      io.out(`training     ${out.trainTokensPerSecond} tokens/s (${tokens} tokens, forward + backward + AdamW)`);
      io.out(
        `cycle split  generating ${(out.generateShare * 100).toFixed(0)}% (${out.msPerPlay} ms per play, sandbox included), training ${(out.trainShare * 100).toFixed(0)}%`,
      );
    }
    return 0;
  } finally {
    close();
  }
}
