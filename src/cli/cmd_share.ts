/**
 * `spade share encode FILE... [--title T] [--base URL]` — make a share link from an env set
 *   (.json) or from environment files (.js with `// @title` headers).
 * `spade share decode LINK [--out FILE] [--json]` — read a share link back into an env set.
 */
import { readFile, writeFile } from 'node:fs/promises';
import { basename } from 'node:path';
import {
  decodeShareLink,
  encodeShareLink,
  envSetToJson,
  makeEnvSet,
  parseEnvSetJson,
  recordFromCode,
} from '../core/env/envset.ts';
import { UsageError } from '../core/errors.ts';
import { parseArgs, type Io } from './args.ts';

export async function share(argv: string[], io: Io): Promise<number> {
  const [sub, ...rest] = argv;
  const args = parseArgs(rest, ['json']);
  if (sub === 'encode') {
    if (args.positional.length === 0)
      throw new UsageError('share encode needs an env set .json or environment .js files');
    const files = args.positional;
    let set;
    if (files.length === 1 && files[0]!.endsWith('.json')) set = parseEnvSetJson(await readFile(files[0]!, 'utf8'));
    else {
      const envs = [];
      for (const f of files) envs.push(recordFromCode(await readFile(f, 'utf8')));
      set = makeEnvSet(
        args.flags.get('title')?.[0] ?? (files.length === 1 ? envs[0]!.title : `${files.length} environments`),
        envs,
      );
    }
    const payload = encodeShareLink(set);
    const base = args.flags.get('base')?.[0] ?? 'http://127.0.0.1:5173/';
    const link = `${base}#panel=environments&set=${payload}`;
    if (args.flags.has('json'))
      io.out(JSON.stringify({ ok: true, link, chars: payload.length, envs: set.envs.length }));
    else io.out(link);
    return 0;
  }
  if (sub === 'decode') {
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
  throw new UsageError('share needs "encode" or "decode"');
}
