// `spade COMMAND --help` and `-h` for every command and subcommand `spade help` lists: exit 0, a
// usage line, the flags with their defaults and an example, without running the command (`serve
// --help` would otherwise listen until killed). Plus the strict parser's usage errors (exit 2).
import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { main, USAGE } from '../../src/cli/spade.ts';

async function spade(...argv: string[]) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await main(argv, { out: (l) => out.push(...l.split('\n')), err: (l) => err.push(...l.split('\n')) });
  return { code, out, err, text: out.join('\n') };
}

/** The command words of each `  spade ...` line of the overview: `spade run export DIR` → ["run", "export"]. */
function listed(usage: string): string[][] {
  const seen = new Set<string>();
  const out: string[][] = [];
  for (const line of usage.split('\n')) {
    const m = /^ {2}spade ((?:[a-z]+ ?)+)/.exec(line);
    if (!m) continue;
    const words = m[1]!.trim().split(' ');
    if (seen.has(words.join(' '))) continue;
    seen.add(words.join(' '));
    out.push(words);
  }
  return out;
}

const COMMANDS = listed(USAGE);
const GROUPS = ['bench', 'engine', 'train', 'share', 'config'];

describe('spade --help', { timeout: 60_000 }, () => {
  it('the overview lists every command, and `help`, `--help`, `-h` print it with exit 0', async () => {
    expect(COMMANDS.map((w) => w.join(' '))).toEqual(
      expect.arrayContaining(['run', 'run export', 'lab', 'lab check', 'lab compare', 'serve', 'bench sandbox']),
    );
    for (const h of ['help', '--help', '-h']) {
      const r = await spade(h);
      expect(r.code).toBe(0);
      expect(r.text).toBe(USAGE);
    }
  });

  for (const words of COMMANDS)
    for (const h of ['--help', '-h'])
      it(`spade ${words.join(' ')} ${h}`, async () => {
        const r = await spade(...words, h);
        expect(r.code, r.err.join('\n')).toBe(0);
        expect(r.err).toEqual([]);
        if (words[0] === 'help') {
          expect(r.text).toBe(USAGE);
          return;
        }
        // the usage line names the command; then its flags, each with what it does, and an example
        expect(r.out[0]).toMatch(new RegExp(`^Usage: spade ${words.join(' ')}( |$)`));
        expect(r.out).toContain('Flags:');
        expect(r.out.some((l) => /^ {2}-h, --help +show this help and exit$/.test(l))).toBe(true);
        const flags = r.out.filter((l) => /^ {2}--[a-z-]+/.test(l));
        expect(flags.length).toBeGreaterThan(0);
        expect(r.out.some((l) => l === 'Example:' || l === 'Examples:')).toBe(true);
        const after = r.out.slice(r.out.findIndex((l) => l.startsWith('Example')) + 1);
        const examples = after.slice(0, after.includes('') ? after.indexOf('') : undefined);
        expect(examples.length).toBeGreaterThan(0);
        // every example is a command line of this very command, with flags it declares
        for (const e of examples) {
          expect(e).toMatch(new RegExp(`^ {2}(\\S+=\\S+ )?spade ${words.join(' ')}( |$)`));
          for (const f of e.match(/ --[a-z-]+/g) ?? []) expect(r.text).toContain(`\n  ${f.trim()}`);
        }
      });

  it('a group without a bare form lists its subcommands, each also in the overview', async () => {
    for (const g of GROUPS) {
      const r = await spade(g, '--help');
      expect(r.code).toBe(0);
      expect(r.out[0]).toMatch(new RegExp(`^Usage: spade ${g} `));
      const subs = r.out.filter((l) => l.startsWith(`  spade ${g} `)).map((l) => l.trim().split(/\s+/)[2]);
      expect(subs.length).toBeGreaterThan(0);
      for (const s of subs) expect(COMMANDS.map((w) => w.join(' '))).toContain(`${g} ${s}`);
      // without a subcommand: a usage error naming them
      const bare = await spade(g);
      expect(bare.code).toBe(2);
      expect(bare.err.join('\n')).toContain(`needs a subcommand: ${subs.join(', ')}`);
    }
  });

  it('the bare forms list their subcommands under their own flags', async () => {
    const lab = await spade('lab', '-h');
    expect(lab.out[0]).toMatch(/^Usage: spade lab /);
    expect(lab.out).toContain('Subcommands:');
    expect(lab.text).toMatch(/\n {2}spade lab check +\S.*\n {2}spade lab compare +\S/);
    // `spade micro`, the older name, is the same command, and both helps say so
    expect((await spade('micro', '-h')).text).toBe(lab.text);
    expect(lab.text).toContain('Also `spade micro`, its older name.');
    expect(USAGE).toContain('`spade micro`, its older name, is the same command');
    const run = await spade('run', '--help');
    expect(run.text).toMatch(/spade run export\s+One run file/);
  });

  it('shows the defaults the command uses', async () => {
    const run = await spade('run', '--help');
    expect(run.text).toMatch(/--iterations N\s+cycles to run \(default: 1\)/);
    expect(run.text).toMatch(/--api-key KEY\s+.*OPENAI_API_KEY/);
    const serve = await spade('serve', '--help');
    expect(serve.text).toMatch(/--port P\s+the port to listen on \(default: 8000\)/);
  });

  it('an undeclared flag, a value given to a switch, a missing value, a stray argument or a bad value exit 2', async () => {
    const cases: [string[], string][] = [
      [['validate', 'x.js', '--nope'], 'spade validate: unknown flag --nope (spade validate --help lists its flags)'],
      [['lab', '--cycles'], '--cycles needs a value'],
      [['lab', '--traps=yes'], '--traps is a switch and takes no value'],
      [['gpu', 'extra'], 'spade gpu takes no argument "extra"'],
      [['bench', 'nope'], 'spade bench: unknown subcommand "nope"'],
      [['lab', 'nope'], 'spade lab: unknown subcommand "nope" (subcommands: check, compare; spade lab --help)'],
      [['validate', 'x.js', '--max-turns', '2.5'], '--max-turns must be a whole number; got "2.5"'],
      [
        ['engine', 'generate', '--model', 'm', '--tokens', '1', '--device', 'tpu'],
        '--device must be gpu or cpu; got "tpu"',
      ],
    ];
    for (const [argv, message] of cases) {
      const r = await spade(...argv, '--json');
      expect(r.code, argv.join(' ')).toBe(2);
      expect(r.err.join('\n')).toContain(message);
      expect(JSON.parse(r.out.at(-1)!)).toMatchObject({ ok: false, error: { name: 'UsageError' } });
    }
  });

  it('--version, -V and `version` print the version with exit 0', async () => {
    const pkg = JSON.parse(await readFile(new URL('../../package.json', import.meta.url), 'utf8')) as {
      version: string;
    };
    for (const v of ['--version', '-V', 'version']) {
      const r = await spade(v);
      expect(r.code, v).toBe(0);
      expect(r.out).toEqual([`spade ${pkg.version}`]);
      expect(r.err).toEqual([]);
    }
  });

  it('`spade help CMD [SUB]` prints what `spade CMD [SUB] --help` prints', async () => {
    for (const words of [['run'], ['lab', 'compare'], ['bench'], ['run', 'export'], ['lab']]) {
      const viaHelp = await spade('help', ...words);
      const viaFlag = await spade(...words, '--help');
      expect(viaHelp.code, words.join(' ')).toBe(0);
      expect(viaHelp.text).toBe(viaFlag.text);
      expect(viaHelp.text).toMatch(new RegExp(`^Usage: spade ${words.join(' ')} `));
    }
    expect((await spade('help', 'help')).text).toBe(USAGE);
    const unknown = await spade('help', 'rnu');
    expect(unknown.code).toBe(2);
    expect(unknown.err).toEqual(['spade: unknown command "rnu"; did you mean "run"? (spade help lists the commands)']);
  });

  it('an unknown command or subcommand says so in one line and suggests the nearest', async () => {
    const cases: [string[], string][] = [
      [['rnu'], 'spade: unknown command "rnu"; did you mean "run"? (spade help lists the commands)'],
      [
        ['valdiate', 'x.js'],
        'spade: unknown command "valdiate"; did you mean "validate"? (spade help lists the commands)',
      ],
      [['zzzzzz'], 'spade: unknown command "zzzzzz" (spade help lists the commands)'],
      [
        ['lab', 'compre'],
        'spade lab: unknown subcommand "compre"; did you mean "compare"? (subcommands: check, compare; spade lab --help)',
      ],
      [
        ['bench', 'sandbx'],
        'spade bench: unknown subcommand "sandbx"; did you mean "sandbox"? (subcommands: sandbox, loop, engine, train, serve, lab; spade bench --help)',
      ],
      [
        ['run', 'exprt'],
        'spade run: unknown subcommand "exprt"; did you mean "export"? (subcommands: export; spade run --help)',
      ],
    ];
    for (const [argv, line] of cases) {
      const r = await spade(...argv);
      expect(r.code, argv.join(' ')).toBe(2);
      expect(r.err).toEqual([line]);
      expect(r.out).toEqual([]);
    }
  });

  it('every error has one prefix: the command, then the message (usage) or the error class and the message', async () => {
    const flagTypo = await spade('lab', '--cylces', '3');
    expect(flagTypo.err).toEqual(['spade lab: unknown flag --cylces (spade lab --help lists its flags)']);
    const missing = await spade('run', '--backend', 'replay', '--out', '/nonexistent-dir/x');
    expect(missing.code).toBe(2);
    expect(missing.err).toEqual([
      'spade run: --backend replay needs --replay FILE (a transcript recorded with --record)',
    ]);
    const failed = await spade('share', 'decode', 'zzz');
    expect(failed.code).toBe(1);
    expect(failed.err).toEqual([expect.stringMatching(/^spade share: ShareLinkError: This link was made by /)]);
    for (const l of [...flagTypo.err, ...missing.err, ...failed.err]) expect(l.match(/spade [a-z]+:/g)).toHaveLength(1);
  });

  it('--help after `--` is an argument, not a request for help', async () => {
    const r = await spade('validate', '--', '--help');
    expect(r.code).toBe(2);
    expect(r.err.join('\n')).toContain('cannot read --help');
  });
});
