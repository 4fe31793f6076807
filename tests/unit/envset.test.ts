// Env sets and share links: round trips, and hostile or malformed input rejected with clear errors.
import { deflateSync, strToU8 } from 'fflate';
import { describe, expect, it } from 'vitest';
import {
  decodeShareLink,
  encodeShareLink,
  envSetToJson,
  makeEnvSet,
  MAX_LINK_CHARS,
  parseEnvSet,
  parseEnvSetJson,
  recordFromCode,
} from '../../src/core/env/envset.ts';
import { EnvSetError, ShareLinkError } from '../../src/core/errors.ts';
import { createRng } from '../../src/core/rng.ts';

const CODE = `// @title Tiny
// @setting games
// @skill spatial
// @difficulty easy
// @hint Walk, then
// @hint look.
class TinyEnv { reset(){ return ['hi', {}] } step(){ return ['x', 0, true, false, {}] } solution(){ return [] } }`;

const b64url = (bytes: Uint8Array) =>
  btoa(String.fromCharCode(...bytes))
    .replace(/\+/g, '-')
    .replace(/\//g, '_')
    .replace(/=+$/, '');

describe('env set format', () => {
  it('builds records from headers and round-trips through JSON', () => {
    const r = recordFromCode(CODE);
    expect(r).toMatchObject({
      title: 'Tiny',
      setting: 'games',
      skill: 'spatial',
      difficulty: 'easy',
      hint: 'Walk, then look.',
    });
    expect(recordFromCode(CODE).id).toBe(r.id);
    const set = makeEnvSet('mine', [r]);
    expect(parseEnvSetJson(envSetToJson(set))).toEqual(set);
  });
  it('names the first problem', () => {
    expect(() => parseEnvSetJson('{')).toThrow(EnvSetError);
    expect(() => parseEnvSet({ format: 'zip' })).toThrow(
      'This is not a SPADE env set: "format" must be "spade-envset", got "zip".',
    );
    expect(() => parseEnvSet({ format: 'spade-envset', version: 9 })).toThrow(/Unsupported env set version 9/);
    const set = makeEnvSet('x', [recordFromCode(CODE)]);
    expect(() => parseEnvSet({ ...set, envs: [{ ...set.envs[0], setting: 'chess' }] })).toThrow(
      'envs[0].setting must be one of games, tool_use.',
    );
    expect(() => parseEnvSet({ ...set, envs: [{ ...set.envs[0], stats: { regret: 'high' } }] })).toThrow(
      'envs[0].stats.regret must be a finite number.',
    );
  });
  it('recomputes ids from code instead of trusting them', () => {
    const set = makeEnvSet('x', [{ ...recordFromCode(CODE), id: 'forged' }]);
    expect(parseEnvSet(set).envs[0]!.id).toBe(recordFromCode(CODE).id);
  });
});

describe('share links', () => {
  it('round-trips a set through a link, a hash or a full URL', () => {
    const set = makeEnvSet('shared', [recordFromCode(CODE)]);
    const payload = encodeShareLink(set);
    expect(payload).toMatch(/^1\.[A-Za-z0-9_-]+$/);
    expect(decodeShareLink(payload)).toEqual(set);
    expect(decodeShareLink(`https://example.org/app/#panel=environments&set=${payload}`)).toEqual(set);
    expect(decodeShareLink(`#set=${payload}`)).toEqual(set);
  });
  it('refuses sets past the size cap with a message that says what to do', () => {
    const rng = createRng(3);
    const noisy = Array.from({ length: 40 }, (_, i) =>
      recordFromCode(`class N${i}Env {} // ${Array.from({ length: 2000 }, () => rng.int(36).toString(36)).join('')}`),
    );
    expect(() => encodeShareLink(makeEnvSet('big', noisy))).toThrow(
      /too big for a link .* Share fewer environments, or export it as a file\./,
    );
  });
  it.each([
    ['empty', '', 'The link is empty.'],
    ['no set', 'https://x/#panel=run', 'This link carries no environment set'],
    ['wrong version', '7.abc', 'different version'],
    ['bad characters', '1.<script>alert(1)</script>', 'contains characters a share link never has'],
    ['not deflate', `1.${b64url(strToU8('hello world'))}`, 'does not decompress'],
    ['not json', `1.${b64url(deflateSync(strToU8('{{{')))}`, 'content is not JSON'],
    [
      'not a set',
      `1.${b64url(deflateSync(strToU8('{"format":"spade-envset","version":1,"title":"t","envs":[{"code":1}]}')))}`,
      'envs[0].code must be a string',
    ],
    [
      'prototype pollution',
      `1.${b64url(deflateSync(strToU8('{"__proto__":{"polluted":true},"format":"spade-envset","version":1,"title":"t","envs":[]}')))}`,
      null,
    ],
    ['too long', `1.${'A'.repeat(MAX_LINK_CHARS + 1)}`, 'too long'],
  ])('rejects a hostile link: %s', (_name, link, message) => {
    if (message === null) {
      const set = decodeShareLink(link);
      expect(set.envs).toEqual([]);
      expect(({} as Record<string, unknown>).polluted).toBeUndefined();
      return;
    }
    expect(() => decodeShareLink(link)).toThrow(ShareLinkError);
    expect(() => decodeShareLink(link)).toThrow(message);
  });
  it('stops a deflate bomb at the size cap', () => {
    const bomb = deflateSync(new Uint8Array(8 * 2 ** 20).fill(32), { level: 9 });
    expect(bomb.length).toBeLessThan(MAX_LINK_CHARS);
    expect(() => decodeShareLink(`1.${b64url(bomb)}`)).toThrow(
      'The linked set unpacks to more than 2 MiB; it was rejected.',
    );
  });
});
