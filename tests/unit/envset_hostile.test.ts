// Env sets and share links from a hostile author: deep JSON anywhere a set is read is a typed error
// (never a bare RangeError), and a program built to share a seed environment's id (the id is a 32-bit
// hash, so one can be forged: tests/helpers/forge_id.ts) is renamed and said so, so it can never
// stand in for the seed.
import { deflateSync, strToU8 } from 'fflate';
import { describe, expect, it } from 'vitest';
import {
  decodeShareLink,
  encodeShareLink,
  envId,
  envSetToJson,
  makeEnvSet,
  parseEnvSet,
  parseEnvSetJson,
  recordFromCode,
} from '../../src/core/env/envset.ts';
import { SEED_ENVS } from '../../src/core/env/seeds/index.ts';
import { EnvSetError, RunFileError, ShareLinkError } from '../../src/core/errors.ts';
import { parseRunFileJson } from '../../src/core/spade/run_file.ts';
import { forgeSameId } from '../helpers/forge_id.ts';

const deepList = (n: number) => '['.repeat(n) + ']'.repeat(n);
const deepObject = (n: number) => '{"a":'.repeat(n) + '1' + '}'.repeat(n);
const linkOf = (json: string) =>
  `#set=1.${Buffer.from(deflateSync(strToU8(json), { level: 9 }))
    .toString('base64')
    .replace(/\+/g, '-')
    .replace(/\//g, '_')
    .replace(/=+$/, '')}`;

const IMPOSTOR_BODY = `// @title Impostor
class ImpostorEnv { reset(s){ this.t = 0; return ['Say anything.', {}]; } step(a){ this.t++; return ['You win.', 1, this.t >= 2, false, {}]; } solution(){ return ['\\\\boxed{1}', '\\\\boxed{2}']; } }`;

describe('deep JSON in an env set is a typed error', () => {
  const good = JSON.parse(envSetToJson(makeEnvSet('t', [SEED_ENVS[0]!]))) as Record<string, unknown>;
  const withField = (key: string, raw: string) => {
    const marker = '"__DEEP__"';
    return JSON.stringify({ ...good, [key]: '__DEEP__' }).replace(marker, raw);
  };
  const cases: [string, string][] = [
    ['format, a 100 000-deep list', withField('format', deepList(100_000))],
    ['format, a 100 000-deep object', withField('format', deepObject(100_000))],
    ['version, a 100 000-deep list', withField('version', deepList(100_000))],
    ['title, a 50 000-deep list', withField('title', deepList(50_000))],
    ['envs, a 100 000-deep list', withField('envs', deepList(100_000))],
    ['the whole set, a 100 000-deep list', deepList(100_000)],
    [
      'an environment field',
      JSON.stringify({ ...good, envs: [{ ...(good.envs as object[])[0], setting: '__DEEP__' }] }).replace(
        '"__DEEP__"',
        deepObject(100_000),
      ),
    ],
    [
      'an environment source',
      JSON.stringify({ ...good, envs: [{ ...(good.envs as object[])[0], source: '__DEEP__' }] }).replace(
        '"__DEEP__"',
        deepList(100_000),
      ),
    ],
  ];

  it.each(cases)('%s: an EnvSetError from a file', (_what, json) => {
    const e = (() => {
      try {
        parseEnvSetJson(json);
      } catch (err) {
        return err;
      }
    })();
    expect(e).toBeInstanceOf(EnvSetError);
    expect((e as Error).message.length).toBeLessThan(400);
  });

  it.each(cases)('%s: a ShareLinkError from a link', (_what, json) => {
    const e = (() => {
      try {
        decodeShareLink(linkOf(json));
      } catch (err) {
        return err;
      }
    })();
    expect(e).toBeInstanceOf(ShareLinkError);
  });

  it('a run file with a deep format is a RunFileError', () => {
    expect(() => parseRunFileJson(`{"format": ${deepList(100_000)}}`)).toThrow(RunFileError);
    expect(() => parseRunFileJson(`{"version": 1, "format": ${deepObject(100_000)}}`)).toThrow(RunFileError);
  });

  it('says what the format was without walking into it', () => {
    expect(() => parseEnvSetJson(withField('format', deepList(100_000)))).toThrow(/got a list\./);
    expect(() => parseEnvSetJson(withField('format', '"' + 'x'.repeat(10_000) + '"'))).toThrow(/got "x{40}…"\./);
  });
});

describe("a program forged to take a seed's id", () => {
  const seed = SEED_ENVS.find((e) => e.title === 'Lantern Lock')!;
  const impostorCode = forgeSameId(seed.code, IMPOSTOR_BODY);

  it('really has the seed id (the attack works on the id alone)', () => {
    expect(envId(impostorCode)).toBe(seed.id);
    expect(impostorCode).not.toBe(seed.code);
    expect(impostorCode.length).toBe(seed.code.length);
  });

  it('is renamed when a share link or an env set carries it, and the reader is told', () => {
    const impostor = recordFromCode(impostorCode);
    const link = encodeShareLink(makeEnvSet('gift', [impostor]));
    const set = decodeShareLink(`#set=${link}`);
    expect(set.envs[0]!.id).not.toBe(seed.id);
    expect(set.envs[0]!.id).toBe(`${seed.id}~2`);
    expect(set.envs[0]!.code).toBe(impostorCode);
    expect(set.notices).toHaveLength(1);
    expect(set.notices![0]).toMatch(/has the id of a seed environment .* other code: it is shown as/);
    // a file, and a set that also holds the seed itself: the seed keeps its id
    const both = parseEnvSetJson(envSetToJson(makeEnvSet('two', [impostor, seed])));
    expect(both.envs.map((e) => [e.title, e.id])).toEqual([
      ['Impostor', `${seed.id}~2`],
      [seed.title, seed.id],
    ]);
    // the notice is never written back into a file or a link
    expect(envSetToJson(set)).not.toContain('notices');
    expect(decodeShareLink(`#set=${encodeShareLink(set)}`).envs[0]!.code).toBe(impostorCode);
  });

  it('every seed keeps its id against a forged program', () => {
    for (const s of SEED_ENVS.slice(0, 4)) {
      const code = forgeSameId(s.code, IMPOSTOR_BODY);
      const read = parseEnvSet(JSON.parse(envSetToJson(makeEnvSet('x', [recordFromCode(code)]))));
      expect(read.envs[0]!.id, s.title).not.toBe(s.id);
    }
  });
});
