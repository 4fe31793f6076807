// Env sets and share links: round trips, and hostile or malformed input rejected with clear errors;
// the one size cap (MAX_SET_BYTES) for links, files and storage; saved sets removed by their key.
import { deflateSync, strToU8 } from 'fflate';
import { describe, expect, it } from 'vitest';
import {
  checkSetSize,
  decodeShareLink,
  encodeShareLink,
  envSetToJson,
  makeEnvSet,
  MAX_LINK_CHARS,
  MAX_SET_BYTES,
  parseEnvSet,
  parseEnvSetJson,
  recordFromCode,
  type EnvSet,
} from '../../src/core/env/envset.ts';
import { loadSavedSets, removeSavedSet, saveSet } from '../../src/core/env/saved_sets.ts';
import { EnvSetError, ShareLinkError } from '../../src/core/errors.ts';
import { createRng } from '../../src/core/rng.ts';
import { MemoryStore } from '../../src/core/store.ts';

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
  it('keeps the same program twice as two records with distinct ids', () => {
    const r = recordFromCode(CODE);
    const envs = parseEnvSet(makeEnvSet('x', [r, { ...r, title: 'Again' }, r])).envs;
    expect(envs.map((e) => e.title)).toEqual(['Tiny', 'Again', 'Tiny']);
    expect(envs.map((e) => e.id)).toEqual([r.id, `${r.id}-2`, `${r.id}-3`]);
  });
  it('applies MAX_SET_BYTES to file text, counted in UTF-8 bytes, with a typed error', () => {
    const set = makeEnvSet('big', [recordFromCode(CODE)]);
    const json = envSetToJson(set);
    // pad the JSON with whitespace (still valid) to just under and just over the cap
    const at = (bytes: number) => json.replace(/\n$/, ' '.repeat(bytes - json.length) + '\n');
    expect(at(MAX_SET_BYTES).length).toBe(MAX_SET_BYTES);
    expect(parseEnvSetJson(at(MAX_SET_BYTES))).toEqual(set);
    expect(() => parseEnvSetJson(at(MAX_SET_BYTES + 1))).toThrow(EnvSetError);
    expect(() => parseEnvSetJson(at(MAX_SET_BYTES + 1))).toThrow('an env set may be at most 2 MiB');
    // 'é' is 2 bytes: a text under the cap in characters but over it in bytes is refused too
    const wide = json
      .replace('"big"', `"${'é'.repeat(100)}"`)
      .replace(/\n$/, ' '.repeat(MAX_SET_BYTES - json.length - 150) + '\n');
    expect(wide.length).toBeLessThan(MAX_SET_BYTES);
    expect(() => parseEnvSetJson(wide)).toThrow(/may be at most 2 MiB/);
    try {
      checkSetSize(3 * 2 ** 20, 'huge.json');
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(EnvSetError);
      expect((err as EnvSetError).message).toBe(
        'huge.json is 3.0 MiB; an env set may be at most 2 MiB. Split it into smaller sets.',
      );
      expect((err as EnvSetError).data).toEqual({ bytes: 3 * 2 ** 20, limit: MAX_SET_BYTES });
    }
    expect(() => checkSetSize(MAX_SET_BYTES)).not.toThrow();
  });
});

describe('saved env sets', () => {
  const named = (title: string): EnvSet => makeEnvSet(title, [recordFromCode(CODE)]);

  it('removes the set it was asked to, even after a damaged entry was skipped', async () => {
    const store = new MemoryStore();
    const a = await saveSet(store, named('A'), 1000);
    await store.put('envsets', 'set-00000000t-x', { format: 'zip' }); // damaged, sorts between A and B
    const b = await saveSet(store, named('B'), 2000);
    const c = await saveSet(store, named('C'), 3000);
    const loaded = await loadSavedSets(store);
    expect(loaded.sets.map((s) => [s.key, s.set.title])).toEqual([
      [a.key, 'A'],
      [b.key, 'B'],
      [c.key, 'C'],
    ]);
    expect(loaded.damaged).toEqual([
      { key: 'set-00000000t-x', problem: expect.stringContaining('This is not a SPADE env set') },
    ]);
    // Remove on "B" (index 1 in the list) deletes B: before, index 1 of the store's keys was the damaged one
    await removeSavedSet(store, loaded.sets[1]!.key);
    const after = await loadSavedSets(store);
    expect(after.sets.map((s) => s.set.title)).toEqual(['A', 'C']);
    expect(after.damaged.map((d) => d.key)).toEqual(['set-00000000t-x']);
  });
  it('gives every save its own key, in save order', async () => {
    const store = new MemoryStore();
    const keys = [(await saveSet(store, named('1'), 5)).key, (await saveSet(store, named('2'), 5)).key];
    expect(new Set(keys).size).toBe(2);
    expect([...keys].sort()).toEqual(keys);
    expect((await loadSavedSets(store)).sets.map((s) => s.set.title)).toEqual(['1', '2']);
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
