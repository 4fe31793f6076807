// Entry of the bundle made by scripts/device/bundle.js (.dev/spade_engine.mjs): the engine commands of
// `spade` only — `logits|generate ...` as `spade engine`, `bench-engine [--json] [--quick]` as
// `spade bench engine` (see docs/benchmarks.md).
import { parseArgs, type Io } from '../../src/cli/args.ts';
import { benchEngine } from '../../src/cli/bench_engine.ts';
import { engine } from '../../src/cli/cmd_engine.ts';

const io: Io = { out: (l: string) => console.log(l), err: (l: string) => console.error(l) };
const [cmd, ...rest] = process.argv.slice(2);
process.exitCode =
  cmd === 'bench-engine'
    ? await benchEngine(io, parseArgs(rest, ['json', 'quick']))
    : await engine([cmd!, ...rest], io);
