/**
 * `spade share encode FILE... [--title T] [--base URL]` — make a share link from an env set
 *   (.json) or from environment files (.js with `// @title` headers).
 * `spade share decode LINK [--out FILE] [--json]` — read a share link back into an env set.
 */
import { writeFile } from 'node:fs/promises';
import { basename } from 'node:path';
import {
  decodeShareLink,
  encodeShareLink,
  envSetToJson,
  makeEnvSet,
  MAX_SET_BYTES,
  parseEnvSetJson,
  recordFromCode,
} from '../core/env/envset.ts';
import { UsageError } from '../core/errors.ts';
import { readRegularText } from '../platform/node/regular_file.ts';
import { flag, JSON_FLAG, parseCommand, pickSubcommand, type CommandSpec, type Io } from './args.ts';

const SHARE_ENCODE: CommandSpec = {
  name: 'share encode',
  usage: 'FILE... [flags]',
  summary: 'Make a share link from an env set (.json) or from environment files (.js with `// @title` headers).',
  positionals: true,
  flags: {
    title: { value: 'T', help: 'the set\'s title (default: the one environment\'s title, or "N environments")' },
    base: { value: 'URL', help: "the app's address the link opens", default: 'http://127.0.0.1:5173/' },
    json: JSON_FLAG,
  },
  example: 'spade share encode src/core/env/seeds/lantern_lock.js',
};

const SHARE_DECODE: CommandSpec = {
  name: 'share decode',
  usage: 'LINK [flags]',
  summary: 'Read a share link back into an env set (checked, with the same limits as the app).',
  positionals: true,
  flags: { out: { value: 'FILE', help: 'write the env set (.json) here' }, json: JSON_FLAG },
  example: "spade share decode 'http://127.0.0.1:5173/#panel=environments&set=...' --out set.json",
};

/** A file to share: a regular file (a FIFO or a device is refused unread), at most `limit` bytes read. */
async function readInput(file: string, limit: number): Promise<string> {
  const text = await readRegularText(file, limit);
  if (text === null) throw new UsageError(`cannot read ${file}: there is no such file`);
  return text;
}

export async function share(argv: string[], io: Io): Promise<number> {
  const picked = pickSubcommand(
    { name: 'share', summary: 'Share links: environments in a URL.', subcommands: [SHARE_ENCODE, SHARE_DECODE] },
    argv,
    io,
  );
  if (!picked) return 0;
  const args = parseCommand(picked.spec, picked.rest, io);
  if (!args) return 0;
  if (picked.spec === SHARE_ENCODE) {
    if (args.positional.length === 0)
      throw new UsageError('share encode needs an env set .json or environment .js files');
    const files = args.positional;
    let set;
    if (files.length === 1 && files[0]!.endsWith('.json'))
      set = parseEnvSetJson(await readInput(files[0]!, MAX_SET_BYTES));
    else {
      const envs = [];
      for (const f of files) envs.push(recordFromCode(await readInput(f, 2 ** 20)));
      set = makeEnvSet(
        args.flags.get('title')?.[0] ?? (files.length === 1 ? envs[0]!.title : `${files.length} environments`),
        envs,
      );
    }
    const payload = encodeShareLink(set);
    const base = flag(args, 'base')!;
    const link = `${base}#panel=environments&set=${payload}`;
    if (args.flags.has('json'))
      io.out(JSON.stringify({ ok: true, link, chars: payload.length, envs: set.envs.length }));
    else io.out(link);
    return 0;
  }
  // share decode
  const [link] = args.positional;
  if (!link) throw new UsageError('share decode needs a LINK');
  const set = decodeShareLink(link);
  const out = args.flags.get('out')?.[0];
  if (out) await writeFile(out, envSetToJson(set));
  if (args.flags.has('json')) io.out(JSON.stringify({ ok: true, set }));
  else {
    io.out(`${set.title}: ${set.envs.length} environment(s)${out ? ` written to ${basename(out)}` : ''}`);
    for (const e of set.envs) io.out(`  ${e.title} — ${e.setting}, ${e.skill}, ${e.difficulty}`);
  }
  return 0;
}
