/**
 * Env sets: a versioned JSON format for a list of environments (code, title,
 * setting, skill, difficulty, hint, source document, statistics), and share
 * links that carry a set compressed (deflate, fflate) as base64url in the URL
 * hash. Parsing never throws anything but EnvSetError / ShareLinkError with a
 * message; nothing in a set is ever executed here (code runs only in the sandbox).
 */
import { deflateSync, strToU8, strFromU8 } from 'fflate';
import { decompressCapped } from '../capped_decompress.ts';
import { DIFFICULTIES, SETTINGS, type Difficulty, type Setting } from '../config.ts';
import { EnvSetError, ShareLinkError } from '../errors.ts';
import { hashSeed } from '../rng.ts';
import { parseEnvHeader } from './contract.ts';

const ENVSET_FORMAT = 'spade-envset';
const ENVSET_VERSION = 1;
/** Longest share link payload we produce or accept (characters after "set="). */
export const MAX_LINK_CHARS = 60_000;
/**
 * Largest set we accept, as UTF-8 bytes of its JSON, from a link (decompressed: guards against
 * deflate bombs), a file or storage: 500 environments of ~4 KiB each, with room to spare.
 */
export const MAX_SET_BYTES = 2 * 2 ** 20;
const MAX_ENVS = 500;

interface EnvStats {
  plays?: number;
  winRate?: number;
  winRateHinted?: number;
  regret?: number;
  designerReward?: number;
  checked?: boolean;
}

export interface EnvRecord {
  id: string;
  title: string;
  setting: Setting;
  skill: string;
  difficulty: Difficulty;
  code: string;
  hint: string;
  /** The grounding document this environment was built on, if any. */
  source: { title: string; ref: string } | null;
  stats: EnvStats;
}

export interface EnvSet {
  format: typeof ENVSET_FORMAT;
  version: typeof ENVSET_VERSION;
  title: string;
  envs: EnvRecord[];
  /** What reading the set changed and the reader should be told (a record renamed off a seed's id); never written. */
  notices?: string[];
}

/** Stable id from the code (same code → same id). */
export function envId(code: string): string {
  return `e${hashSeed(code).toString(36)}${code.length.toString(36)}`;
}

/**
 * Ids that belong to a known program (the seed library registers its own: seeds/index.ts): id →
 * code. envId is a 32-bit hash, so a program can be built to share a seed's id; a record that
 * carries a reserved id with other code is renamed wherever sets are read (parseEnvSet, share
 * links, `spade serve`), so it never stands in for the seed.
 */
const RESERVED = new Map<string, string>();

/** Reserve each record's id for its code (the seed library does this for its own); returns the records. */
export function reserveIds<T extends EnvRecord>(records: T[]): T[] {
  for (const r of records) if (!RESERVED.has(r.id)) RESERVED.set(r.id, r.code);
  return records;
}

/** The code an id is reserved for, if any. */
export function reservedCode(id: string): string | undefined {
  return RESERVED.get(id);
}

/** The first of `${id}~2`, `${id}~3`, … that `taken` does not hold. */
export function freeId(id: string, taken: (id: string) => boolean): string {
  let n = 2;
  while (taken(`${id}~${n}`)) n++;
  return `${id}~${n}`;
}

/**
 * A short, safe description of an untrusted JSON value for a message: never walks into it (a
 * 100 000-deep list is "a list"), strings cut to 40 characters.
 */
function describeValue(v: unknown): string {
  if (v === undefined) return 'nothing';
  if (typeof v === 'string') return JSON.stringify(v.length > 40 ? `${v.slice(0, 40)}…` : v);
  if (v === null || typeof v === 'number' || typeof v === 'boolean') return String(v);
  return Array.isArray(v) ? 'a list' : typeof v === 'object' ? 'an object' : typeof v;
}

/** Build a record from code with a metadata header (`// @title ...`); overrides win. */
export function recordFromCode(code: string, overrides: Partial<EnvRecord> = {}): EnvRecord {
  const h = parseEnvHeader(code);
  const setting = (SETTINGS as readonly string[]).includes(h.setting ?? '')
    ? (h.setting as Setting)
    : /extends\s+ToolUseEnv\b/.test(code)
      ? 'tool_use'
      : 'games';
  const difficulty = (DIFFICULTIES as readonly string[]).includes(h.difficulty ?? '')
    ? (h.difficulty as Difficulty)
    : 'medium';
  return {
    id: envId(code),
    title: h.title ?? /class\s+(\w+Env)\b/.exec(code)?.[1] ?? 'Untitled environment',
    setting,
    skill: h.skill ?? 'unspecified',
    difficulty,
    code,
    hint: h.hint ?? '',
    source: h.source ? { title: h.source, ref: '' } : null,
    stats: {},
    ...overrides,
  };
}

export function makeEnvSet(title: string, envs: EnvRecord[]): EnvSet {
  return { format: ENVSET_FORMAT, version: ENVSET_VERSION, title, envs };
}

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Validate untrusted data as an EnvSet. Throws EnvSetError naming the first problem's path. */
export function parseEnvSet(data: unknown): EnvSet {
  if (!isObj(data))
    throw new EnvSetError('An env set must be a JSON object with "format", "version", "title" and "envs".');
  if (data.format !== ENVSET_FORMAT) {
    throw new EnvSetError(
      `This is not a SPADE env set: "format" must be "${ENVSET_FORMAT}", got ${describeValue(data.format)}.`,
    );
  }
  if (data.version !== ENVSET_VERSION) {
    throw new EnvSetError(
      `Unsupported env set version ${describeValue(data.version)}; this app reads version ${ENVSET_VERSION}. Update the app or re-export the set.`,
    );
  }
  if (typeof data.title !== 'string' || data.title.length > 200)
    throw new EnvSetError('"title" must be a string of at most 200 characters.');
  if (!Array.isArray(data.envs)) throw new EnvSetError('"envs" must be an array.');
  if (data.envs.length > MAX_ENVS)
    throw new EnvSetError(`A set holds at most ${MAX_ENVS} environments; this one has ${data.envs.length}.`);
  const envs = data.envs.map((e, i) => parseRecord(e, `envs[${i}]`));
  // a program built to share a reserved (seed) id is renamed, and the reader is told
  const notices: string[] = [];
  const ids = new Set(envs.map((e) => e.id));
  for (const env of envs) {
    const owner = reservedCode(env.id);
    if (owner === undefined || owner === env.code) continue;
    const id = freeId(env.id, (x) => ids.has(x) || RESERVED.has(x));
    notices.push(
      `"${env.title.slice(0, 80)}" has the id of a seed environment (${env.id}) but other code: it is shown as ${id}, and the seed keeps its id.`,
    );
    ids.add(id);
    env.id = id;
  }
  // the same program twice is two records: ids stay unique within a set (the UI keys lists by them)
  const seen = new Map<string, number>();
  for (const env of envs) {
    const n = (seen.get(env.id) ?? 0) + 1;
    seen.set(env.id, n);
    if (n > 1) env.id = `${env.id}-${n}`;
  }
  return {
    format: ENVSET_FORMAT,
    version: ENVSET_VERSION,
    title: data.title,
    envs,
    ...(notices.length ? { notices } : {}),
  };
}

function parseRecord(e: unknown, path: string): EnvRecord {
  if (!isObj(e)) throw new EnvSetError(`${path} must be an object.`);
  const str = (key: string, max: number, optional = false): string => {
    const v = e[key];
    if (v === undefined && optional) return '';
    if (typeof v !== 'string') throw new EnvSetError(`${path}.${key} must be a string.`);
    if (v.length > max) throw new EnvSetError(`${path}.${key} is longer than ${max} characters.`);
    return v;
  };
  const code = str('code', 1024 * 1024);
  const setting = str('setting', 20);
  if (!(SETTINGS as readonly string[]).includes(setting))
    throw new EnvSetError(`${path}.setting must be one of ${SETTINGS.join(', ')}.`);
  const difficulty = str('difficulty', 20);
  if (!(DIFFICULTIES as readonly string[]).includes(difficulty))
    throw new EnvSetError(`${path}.difficulty must be one of ${DIFFICULTIES.join(', ')}.`);
  let source: EnvRecord['source'] = null;
  if (e.source !== undefined && e.source !== null) {
    if (!isObj(e.source) || typeof e.source.title !== 'string' || typeof e.source.ref !== 'string') {
      throw new EnvSetError(`${path}.source must be null or {"title": string, "ref": string}.`);
    }
    source = { title: e.source.title.slice(0, 300), ref: e.source.ref.slice(0, 2000) };
  }
  const stats: EnvStats = {};
  if (e.stats !== undefined) {
    if (!isObj(e.stats)) throw new EnvSetError(`${path}.stats must be an object.`);
    for (const k of ['plays', 'winRate', 'winRateHinted', 'regret', 'designerReward'] as const) {
      const v = e.stats[k];
      if (v === undefined) continue;
      if (typeof v !== 'number' || !Number.isFinite(v))
        throw new EnvSetError(`${path}.stats.${k} must be a finite number.`);
      stats[k] = v;
    }
    if (typeof e.stats.checked === 'boolean') stats.checked = e.stats.checked;
  }
  return {
    id: envId(code),
    title: str('title', 200),
    setting: setting as Setting,
    skill: str('skill', 60),
    difficulty: difficulty as Difficulty,
    code,
    hint: str('hint', 4000, true),
    source,
    stats,
  };
}

/** UTF-8 length of a string without encoding it. */
function utf8Bytes(text: string): number {
  let n = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x80) n += 1;
    else if (c < 0x800) n += 2;
    else if (c >= 0xd800 && c < 0xdc00 && i + 1 < text.length) {
      n += 4; // a surrogate pair is one 4-byte code point
      i++;
    } else n += 3;
  }
  return n;
}

/** Throws EnvSetError when a set of `bytes` is over MAX_SET_BYTES; call it before reading a file. */
export function checkSetSize(bytes: number, name = 'The set'): void {
  if (bytes > MAX_SET_BYTES) {
    throw new EnvSetError(
      `${name} is ${(bytes / 2 ** 20).toFixed(1)} MiB; an env set may be at most ${MAX_SET_BYTES / 2 ** 20} MiB. Split it into smaller sets.`,
      { bytes, limit: MAX_SET_BYTES },
    );
  }
}

/** Parse the text of an exported .json file (at most MAX_SET_BYTES). */
export function parseEnvSetJson(text: string): EnvSet {
  // text.length ≤ UTF-8 bytes, so a text past the cap in characters is rejected without counting
  checkSetSize(text.length > MAX_SET_BYTES ? text.length : utf8Bytes(text));
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch (err) {
    throw new EnvSetError(`The file is not valid JSON (${(err as Error).message}).`);
  }
  return parseEnvSet(data);
}

/** The set as it is written: the reader's notices left out. */
function written(set: EnvSet): EnvSet {
  return { format: set.format, version: set.version, title: set.title, envs: set.envs };
}

export function envSetToJson(set: EnvSet): string {
  return `${JSON.stringify(written(set), null, 2)}\n`;
}

// --- share links ---------------------------------------------------------------------------

function toBase64Url(bytes: Uint8Array): string {
  let bin = '';
  for (let i = 0; i < bytes.length; i += 0x8000) bin += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(bin).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

function fromBase64Url(text: string): Uint8Array {
  if (!/^[A-Za-z0-9_-]*$/.test(text))
    throw new ShareLinkError(
      'The link is damaged: it contains characters a share link never has. Copy the whole link again.',
    );
  const b64 = text.replace(/-/g, '+').replace(/_/g, '/') + '='.repeat((4 - (text.length % 4)) % 4);
  let bin: string;
  try {
    bin = atob(b64);
  } catch {
    throw new ShareLinkError('The link is damaged (not valid base64url). Copy the whole link again.');
  }
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

/** Inflate with a hard cap on output size. */
function inflateCapped(data: Uint8Array, cap: number): Uint8Array {
  return decompressCapped('deflate', data, cap, {
    tooBig: () => new ShareLinkError(`The linked set unpacks to more than ${cap / 2 ** 20} MiB; it was rejected.`),
    damaged: () => new ShareLinkError('The link is damaged (its data does not decompress). Copy the whole link again.'),
  });
}

/** Payload for `#set=...`: "1." + base64url(deflate(JSON)). Throws ShareLinkError past MAX_LINK_CHARS. */
export function encodeShareLink(set: EnvSet): string {
  const payload = `${ENVSET_VERSION}.${toBase64Url(deflateSync(strToU8(JSON.stringify(written(parseEnvSet(set)))), { level: 9 }))}`;
  if (payload.length > MAX_LINK_CHARS) {
    throw new ShareLinkError(
      `This set is too big for a link (${payload.length.toLocaleString('en')} characters; the limit is ${MAX_LINK_CHARS.toLocaleString('en')}). Share fewer environments, or export it as a file.`,
      { chars: payload.length },
    );
  }
  return payload;
}

/** Accepts a full URL, a "#set=..." hash, or the bare payload. */
export function decodeShareLink(link: string): EnvSet {
  if (typeof link !== 'string' || link.trim() === '') throw new ShareLinkError('The link is empty.');
  let payload = link.trim();
  const hashAt = payload.indexOf('#');
  if (hashAt >= 0 || payload.includes('set=')) {
    const params = new URLSearchParams(payload.slice(hashAt + 1));
    const p = params.get('set');
    if (!p) throw new ShareLinkError('This link carries no environment set (no "set=" in it).');
    payload = p;
  }
  if (payload.length > MAX_LINK_CHARS)
    throw new ShareLinkError(`The link is too long (${payload.length} characters; the limit is ${MAX_LINK_CHARS}).`);
  const dot = payload.indexOf('.');
  const version = dot > 0 ? payload.slice(0, dot) : '';
  if (version !== String(ENVSET_VERSION)) {
    throw new ShareLinkError(
      `This link was made by a different version of SPADE Playground (link version "${version.slice(0, 10)}"; this app reads ${ENVSET_VERSION}).`,
    );
  }
  const text = strFromU8(inflateCapped(fromBase64Url(payload.slice(dot + 1)), MAX_SET_BYTES));
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch {
    throw new ShareLinkError('The link is damaged (its content is not JSON). Copy the whole link again.');
  }
  try {
    return parseEnvSet(data);
  } catch (err) {
    throw new ShareLinkError(`The link does not hold a valid env set: ${(err as Error).message}`);
  }
}
