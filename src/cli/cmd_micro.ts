/**
 * `spade micro [--cycles N] [--seed S] [--designer regret|random|fixed] [--levels K] [--plays N]
 *              [--probe-plays P] [--json]` — the micro self-play lab (src/core/micro/lab.ts) on our
 * engine's CPU references: two tiny fresh models made on the spot from the seed (the `engine init`
 * path, via engine/toy_train.ts's toyModel), one per role, each with its own LoRA adapter and GRPO
 * trainer. One line per cycle; with --json the last line is one JSON object with probeReturnFirst,
 * probeReturnLast, difficultyFirst, difficultyLast (mean designed difficulty, 0–1), cycles, seconds.
 * The engine side (models, adapters, trainers) is engine/micro_policy.ts, shared with the Lab worker.
 */
import { UsageError } from '../core/errors.ts';
import { DESIGNERS, MicroLab, summarise, type DesignerKind } from '../core/micro/lab.ts';
import { createSandboxWorkerApi } from '../core/sandbox/worker_api.ts';
import { engineMicroDeps } from '../engine/micro_policy.ts';
import { flag, intFlag, parseArgs, type Io } from './args.ts';

const f2 = (x: number | null) => (x === null ? '  -  ' : x.toFixed(2));

export async function micro(argv: string[], io: Io): Promise<number> {
  const args = parseArgs(argv, ['json']);
  const json = args.flags.has('json');
  const cycles = intFlag(args, 'cycles', 10);
  const seed = intFlag(args, 'seed', 0);
  const designer = (flag(args, 'designer') ?? 'regret') as DesignerKind;
  if (!DESIGNERS.includes(designer)) throw new UsageError(`--designer must be one of ${DESIGNERS.join(', ')}`);
  if (cycles < 1) throw new UsageError('--cycles must be ≥ 1');
  const t0 = performance.now();
  const deps = await engineMicroDeps(seed, designer, createSandboxWorkerApi());
  const lab = new MicroLab(
    {
      seed,
      designer,
      levels: intFlag(args, 'levels', 4),
      plays: intFlag(args, 'plays', 4),
      probePlays: intFlag(args, 'probe-plays', 2),
    },
    deps,
  );
  const p0 = await lab.start();
  io.out(
    `cycle  0  probe ${f2(p0.mean)} (easy ${f2(p0.byBucket.easy)} medium ${f2(p0.byBucket.medium)} hard ${f2(p0.byBucket.hard)})`,
  );
  for (let c = 1; c <= cycles; c++) {
    const r = await lab.cycle();
    io.out(
      `cycle ${String(c).padStart(2)}  probe ${f2(r.probe.mean)} (easy ${f2(r.probe.byBucket.easy)} medium ${f2(r.probe.byBucket.medium)} hard ${f2(r.probe.byBucket.hard)})` +
        `  designed ${r.designs.map((d) => d.description ?? `invalid(${d.text})`).join(', ')}` +
        `  difficulty ${f2(r.meanDifficulty)}  regret ${f2(r.meanRegret)}  reward ${f2(r.meanDesignerReward)}` +
        `  return ${f2(r.meanReturn)}  ${(r.ms / 1000).toFixed(1)} s`,
    );
  }
  await lab.close();
  const seconds = (performance.now() - t0) / 1000;
  const summary = {
    ...summarise(lab),
    seconds: Math.round(seconds * 10) / 10,
    designer,
    seed,
    secondsPerCycle: Math.round((seconds / cycles) * 10) / 10,
    probeCurve: [p0.mean, ...lab.history.map((h) => h.probe.mean)].map((x) => Math.round(x * 1000) / 1000),
    difficultyCurve: lab.history.map((h) =>
      h.meanDifficulty === null ? null : Math.round(h.meanDifficulty * 1000) / 1000,
    ),
  };
  if (json) io.out(JSON.stringify(summary));
  else
    io.out(
      `probe return ${summary.probeReturnFirst.toFixed(2)} → ${summary.probeReturnLast.toFixed(2)}, designed difficulty ${f2(summary.difficultyFirst)} → ${f2(summary.difficultyLast)}, ${cycles} cycles in ${summary.seconds} s`,
    );
  return 0;
}
