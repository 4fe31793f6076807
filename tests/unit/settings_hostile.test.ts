// Settings, link keys and record fields are looked up by their own keys only. A table lookup keyed
// by outside text (a --set flag, a --config file, a link, a record, an error's name from a worker)
// once found Object.prototype's members: `spade run --set constructor=1` passed as a setting while
// `bogus` was refused. Every such lookup now goes through schema.ts's ownField (own properties) or a
// Map, so each of these names is refused as `bogus` is, and nothing reaches Object.prototype.
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { main } from '../../src/cli/spade.ts';
import { checkField, resolveConfig, validateConfig } from '../../src/core/config.ts';
import { parseEnvHeader } from '../../src/core/env/contract.ts';
import { deserializeError, SpadeError } from '../../src/core/errors.ts';
import { designerNamed } from '../../src/core/lab/lab.ts';
import { parseLabField } from '../../src/core/lab/settings.ts';
import { ownField } from '../../src/core/schema.ts';
import { parseRunSpec } from '../../src/core/spade/run_file.ts';
import { parseUrlState } from '../../src/core/url_state.ts';
import { archiveRecord } from '../helpers/run_records.ts';
import { parseRunJsonl } from '../../src/core/spade/run_file.ts';
import { designerMessages } from '../../src/core/spade/prompts.ts';
import { detectArchitecture } from '../../src/engine/io/config.ts';
import { ModelLoadError } from '../../src/core/errors.ts';
import { parseResetParams } from '../../src/platform/node/serve/openenv.ts';

/** Names every plain object answers through its prototype. */
const PROTO_NAMES = [
  'constructor',
  'toString',
  'valueOf',
  'hasOwnProperty',
  '__proto__',
  'isPrototypeOf',
  'propertyIsEnumerable',
  'toLocaleString',
  '__defineGetter__',
  '__lookupGetter__',
] as const;

afterEach(() => {
  // nothing a test fed in reached the prototype every object shares
  expect(Object.keys(Object.prototype)).toEqual([]);
  expect(({} as Record<string, unknown>).seed).toBeUndefined();
});

describe('ownField: the one lookup of a table by outside text', () => {
  it("finds a table's own keys and nothing of Object.prototype", () => {
    const table = { seed: 1, difficulty: 'easy' } as Record<string, unknown>;
    expect(ownField(table, 'seed')).toBe(1);
    for (const name of [...PROTO_NAMES, 'bogus']) expect(ownField(table, name), name).toBeUndefined();
  });
});

describe('config settings (checkField, validateConfig, resolveConfig)', () => {
  it('refuses every prototype name as an unknown setting, as it refuses bogus', () => {
    for (const name of [...PROTO_NAMES, 'bogus']) {
      expect(checkField(name, 1), name).toMatch(new RegExp(`^unknown setting "${name}"`));
      expect(checkField(name, 'x'), name).toMatch(/^unknown setting/);
      // as a config file holds it (JSON.parse makes "__proto__" an own key)
      const r = validateConfig(JSON.parse(`{"${name}": 1}`));
      expect(r.ok, name).toBe(false);
      expect(r.ok ? [] : r.issues, name).toEqual([expect.stringMatching(new RegExp(`^unknown setting "${name}"`))]);
      expect(() => resolveConfig({ flags: JSON.parse(`{"${name}": 1}`) as Record<string, unknown> }), name).toThrow(
        /unknown setting/,
      );
    }
  });

  it('a config file whose "__proto__" holds settings does not set them', () => {
    const r = validateConfig(JSON.parse('{"__proto__": {"seed": 9}, "seed": 2}'));
    expect(r.ok).toBe(false);
    expect(() => resolveConfig({ link: JSON.parse('{"__proto__": {"seed": 9}}') as Record<string, unknown> })).toThrow(
      /unknown setting "__proto__"/,
    );
  });
});

describe('the CLI refuses prototype names in --set and --config', () => {
  const run = async (argv: string[]) => {
    const err: string[] = [];
    const code = await main(argv, { out: () => undefined, err: (l) => err.push(l) });
    return { code, err: err.join('\n') };
  };

  it('spade config show --set NAME=1 is a usage error for each, as for bogus', async () => {
    for (const name of [...PROTO_NAMES, 'bogus']) {
      const r = await run(['config', 'show', '--set', `${name}=1`, '--json']);
      expect(r.code, name).toBe(2);
      expect(r.err, name).toContain(`unknown setting "${name}"`);
    }
  });

  it('spade run --set NAME=1 is refused before anything runs', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'spade-settings-'));
    // a transcript with its header only: enough to get past --replay to the settings
    const transcript = join(dir, 'transcript.jsonl');
    await writeFile(transcript, '{"format":"spade-replay","version":1,"backend":"x","model":"m"}\n');
    for (const name of ['constructor', 'toString', '__proto__']) {
      const r = await run([
        'run',
        '--backend',
        'replay',
        '--replay',
        transcript,
        '--out',
        join(dir, name),
        '--set',
        `${name}=1`,
      ]);
      expect(r.code, name).toBe(2);
      expect(r.err, name).toContain(`unknown setting "${name}"`);
    }
  });

  it('--config files with those keys, or that are not an object of settings, are refused', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'spade-settings-'));
    for (const [i, text] of [
      '{"constructor": 1}',
      '{"valueOf": "x"}',
      '{"__proto__": {"seed": 3}}',
      '{"hasOwnProperty": 1, "seed": 2}',
    ].entries()) {
      const file = join(dir, `c${i}.json`);
      await writeFile(file, text);
      const r = await run(['config', 'show', '--config', file, '--json']);
      expect(r.code, text).toBe(2);
      expect(r.err, text).toMatch(/unknown setting "(constructor|valueOf|__proto__|hasOwnProperty)"/);
    }
    for (const [i, text] of ['[1, 2]', '42', 'null', '{"seed": 1'].entries()) {
      const file = join(dir, `n${i}.json`);
      await writeFile(file, text);
      const r = await run(['config', 'show', '--config', file, '--json']);
      expect(r.code, text).toBe(2);
      expect(r.err, text).toContain(file);
    }
  });
});

describe('link keys, Lab fields and designer names', () => {
  it('a link with prototype names as keys reports each as unknown and sets nothing', () => {
    const hash = PROTO_NAMES.map((n) => `${n}=1`).join('&') + '&lab.constructor=2&lab.__proto__=3';
    const { fields, problems } = parseUrlState(hash);
    expect(fields).toEqual({ config: {}, lab: {} });
    expect(problems.map((p) => p.code)).toEqual(Array(PROTO_NAMES.length + 2).fill('unknown-key'));
  });

  it('a designer named by a prototype name is no designer, in a link and in `spade lab`', async () => {
    for (const name of PROTO_NAMES) {
      expect(designerNamed(name), name).toBeNull();
      const r = parseLabField('designer', name);
      expect(r.ok, name).toBe(false);
      expect(r.ok ? '' : r.message, name).toBe(
        `lab.designer must be one of learned, untrained, scripted, gated, sfl, ladder, random, fixed, hand; got ${JSON.stringify(name)}`,
      );
      const { fields, problems } = parseUrlState(`lab.designer=${name}`);
      expect(fields.lab, name).toEqual({});
      expect(
        problems.map((p) => p.code),
        name,
      ).toEqual(['bad-value']);
    }
    expect(designerNamed('regret')).toBe('learned'); // the earlier name still reads
    for (const name of ['constructor', 'toString']) {
      const err: string[] = [];
      const code = await main(['lab', '--designer', name, '--cycles', '1'], {
        out: () => undefined,
        err: (l) => err.push(l),
      });
      expect(code, name).toBe(2);
      expect(err.join('\n'), name).toMatch(/--designer must be one of/);
    }
  });

  it('a Lab field asked for by a name that is not one is refused, not read off the prototype', () => {
    for (const name of PROTO_NAMES) {
      const r = parseLabField(name as never, '1');
      expect(r.ok, name).toBe(false);
    }
  });
});

describe('records: run records, run specs, environment headers, errors from a worker', () => {
  it("a run spec's config with prototype keys keeps only the known settings", () => {
    const spec = parseRunSpec(
      JSON.parse(
        '{"config": {"seed": 4, "constructor": 1, "__proto__": {"seed": 9}, "toString": "x"}, "skills": [], "models": {"designer": "d", "hint": "h", "agent": "a"}, "corpus": "c", "createdAt": "t"}',
      ),
      'config.json',
    );
    expect(spec.config.seed).toBe(4);
    expect(Object.keys(spec.config)).not.toContain('constructor');
    expect(Object.hasOwn(spec.config, 'toString')).toBe(false);
    expect(Object.getPrototypeOf(spec.config)).toBe(Object.prototype);
  });

  it('a run record is read from its own fields only, whatever Object.prototype carries', () => {
    const good = archiveRecord(0, 0);
    const { title: _, ...noTitle } = good;
    // a polluted prototype (another library's bug) must not fill in a field the line lacks
    Object.defineProperty(Object.prototype, 'title', { value: 'from the prototype', configurable: true });
    try {
      const { records, skipped } = parseRunJsonl(
        `${JSON.stringify(noTitle)}\n${JSON.stringify(good)}\n`,
        'archive.jsonl',
      );
      expect(records.map((r) => r.title)).toEqual([good.title]);
      expect(skipped).toEqual([expect.stringMatching(/line 1: .*title/)]);
    } finally {
      delete (Object.prototype as Record<string, unknown>).title;
    }
  });

  it("an environment's header keys are its own: `// @constructor`, `// @toString` set nothing else", () => {
    const h = parseEnvHeader(
      '// @constructor evil\n// @toString x\n// @__proto__ y\n// @title Real\nclass AEnv {}',
    ) as Record<string, unknown>;
    expect(h.title).toBe('Real');
    expect(h.constructor).toBe('evil');
    expect(h.toString).toBe('x');
    expect(h.__proto__).toBe('y');
    expect(Object.keys(h).sort()).toEqual(['__proto__', 'constructor', 'title', 'toString']);
  });

  it('an error name from a worker that is a prototype name rebuilds as a plain Error of that name', () => {
    for (const name of PROTO_NAMES) {
      const e = deserializeError({ name, message: 'm', data: {} });
      expect(e, name).toBeInstanceOf(Error);
      expect(e, name).not.toBeInstanceOf(SpadeError);
      expect(e.name, name).toBe(name);
      expect(e.message, name).toBe('m');
    }
  });
});

describe('other tables keyed by outside text: command names, architectures, skills, OpenEnv fields', () => {
  it('`spade NAME` with a prototype name is an unknown command, as `spade bogus` is', async () => {
    for (const name of [...PROTO_NAMES, 'bogus']) {
      const err: string[] = [];
      const code = await main([name], { out: () => undefined, err: (l) => err.push(l) });
      expect(code, name).toBe(2);
      expect(err.join('\n'), name).toContain(`unknown command "${name}"`);
    }
  });

  it("a model's config.json naming a prototype name as its architecture is unsupported", () => {
    for (const name of PROTO_NAMES)
      expect(() => detectArchitecture({ architectures: [name] }), name).toThrow(ModelLoadError);
    expect(detectArchitecture({ architectures: ['LlamaForCausalLM'] })).toBe('llama');
  });

  it("a skill named by a prototype name is described by its own name, not by Object.prototype's members", () => {
    for (const skill of PROTO_NAMES) {
      const messages = designerMessages({
        setting: 'games',
        skill,
        difficulty: 'easy',
        excerpt: null,
        source: null,
        positive: [],
        negative: null,
      });
      const text = JSON.stringify(messages);
      expect(text, skill).toContain(`the skill \\"${skill.replace(/_/g, ' ')}\\"`);
      expect(text, skill).not.toContain('native code');
      expect(text, skill).not.toContain('[object');
    }
  });

  it("a reset's fields are the request's own: a polluted prototype sets no env_id, seed or sample", () => {
    for (const [key, value] of [
      ['env_id', 'from-the-prototype'],
      ['seed', 7],
      ['sample', 'regret'],
      ['hint', 'not a boolean'],
      ['episode_id', 'e'],
    ] as const) {
      Object.defineProperty(Object.prototype, key, { value, configurable: true });
      try {
        expect(parseResetParams({}), key).toEqual({
          seed: null,
          episodeId: null,
          envId: null,
          sample: null,
          hint: false,
        });
      } finally {
        delete (Object.prototype as Record<string, unknown>)[key];
      }
    }
  });
});
