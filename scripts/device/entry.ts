// Entry of the bundle made by scripts/device_bundle.js: the engine commands of `spade` only.
import { engine } from '../../src/cli/cmd_engine.ts';
import { benchEngine } from '../../src/cli/bench_engine.ts';
import { parseArgs } from '../../src/cli/spade.ts';

const io = { out: (l: string) => console.log(l), err: (l: string) => console.error(l) };
const [cmd, ...rest] = process.argv.slice(2);
process.exitCode =
  cmd === 'bench-engine'
    ? await benchEngine(io, parseArgs(rest, ['json', 'quick']))
    : await engine([cmd!, ...rest], io);
