/**
 * `spade config show [--preset NAME] [--config FILE.json] [--set key=value ...] [--seed N] [--link HASH] [--json]`:
 * the resolved configuration, every key with its value and where it came from — default, preset,
 * link (a Settings link's hash, e.g. "#preset=paper&seed=3") or flag (--preset, --config, --set,
 * --seed). The same layering `spade run` uses (`configLayers`), so what it shows is what a run gets.
 * With --json the last line is one JSON object: {ok, preset, config, source}.
 */
import { readUserFile } from '../platform/node/regular_file.ts';
import { CONFIG_KEYS, CONFIG_SCHEMA, PRESET_NAMES, resolveConfig, type ResolvedConfig } from '../core/config.ts';
import { UsageError } from '../core/errors.ts';
import { parseUrlState } from '../core/url_state.ts';
import {
  flag,
  intFlag,
  JSON_FLAG,
  parseCommand,
  pickSubcommand,
  type Args,
  type CommandSpec,
  type Flags,
  type Io,
} from './args.ts';

/** The flags that set a run's configuration (`spade run`, `spade config show`); layered by configLayers. */
export const CONFIG_FLAGS: Flags = {
  preset: {
    value: PRESET_NAMES.join('|'),
    help: `a named set of values (docs/loop.md; default: ${CONFIG_SCHEMA.preset.default})`,
  },
  config: { value: 'FILE.json', help: 'settings from a JSON file (any keys of `spade config show`)' },
  set: { value: 'key=value', many: true, help: 'one setting by its key (`spade config show` lists them)' },
  seed: {
    value: 'N',
    help: `the run's seed (default: ${CONFIG_SCHEMA.seed.default}); every random choice derives from it`,
  },
  link: { value: 'HASH', help: 'the settings of a Settings-panel link ("#preset=paper&seed=3", or the whole URL)' },
};

const CONFIG_SHOW: CommandSpec = {
  name: 'config show',
  usage: '[flags]',
  summary:
    "The resolved settings: each key's value and where it came from (default, preset, link or flag), with\n" +
    'the reason for its default. The same layering `spade run` uses: defaults < preset < link < flags.',
  flags: { ...CONFIG_FLAGS, json: JSON_FLAG },
  example: 'spade config show --preset paper --set concurrency=16',
};

/** The flags' layer of a configuration: --config FILE, then --set key=value, --seed and --preset. */
export async function flagLayer(a: Args): Promise<Record<string, unknown>> {
  let base: Record<string, unknown> = {};
  const file = flag(a, 'config');
  if (file) {
    const text = await readUserFile(file, '--config');
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch (err) {
      throw new UsageError(`--config ${file} is not JSON (${(err as Error).message})`);
    }
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
      throw new UsageError(`--config ${file} must hold an object of settings, e.g. {"seed": 1}`);
    base = parsed as Record<string, unknown>;
  }
  for (const kv of a.flags.get('set') ?? []) {
    const eq = kv.indexOf('=');
    if (eq < 0) throw new UsageError(`--set takes key=value; got "${kv}"`);
    const k = kv.slice(0, eq);
    const v = kv.slice(eq + 1);
    // an own key whatever its name: `base[k] = v` with k "__proto__" would set nothing, and the
    // setting would pass unchecked instead of being refused as unknown
    Object.defineProperty(base, k, {
      value: /^-?\d+(\.\d+)?(e-?\d+)?$/.test(v) ? Number(v) : v,
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  if (a.flags.has('seed')) base.seed = intFlag(a, 'seed', 1);
  const preset = flag(a, 'preset');
  if (preset !== undefined) base.preset = preset;
  return base;
}

/** defaults < preset < link < flags; an invalid value is a usage error naming the key. */
export async function configLayers(a: Args): Promise<ResolvedConfig> {
  const hash = flag(a, 'link');
  let link: Record<string, unknown> = {};
  if (hash !== undefined) {
    const { fields, problems } = parseUrlState(hash.slice(hash.indexOf('#') + 1));
    if (problems.length) throw new UsageError(`--link: ${problems.map((p) => p.message).join('; ')}`);
    link = fields.config;
  }
  try {
    return resolveConfig({ link, flags: await flagLayer(a) });
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
}

export async function config(argv: string[], io: Io): Promise<number> {
  const picked = pickSubcommand({ name: 'config', summary: "A run's settings.", subcommands: [CONFIG_SHOW] }, argv, io);
  if (!picked) return 0;
  const a = parseCommand(picked.spec, picked.rest, io);
  if (!a) return 0;
  const r = await configLayers(a);
  if (a.flags.has('json')) {
    io.out(JSON.stringify({ ok: true, preset: r.config.preset, config: r.config, source: r.source }));
    return 0;
  }
  const width = Math.max(...CONFIG_KEYS.map((k) => k.length));
  io.out(`preset ${r.config.preset} (a key's source: default, preset, link or flag)`);
  for (const k of CONFIG_KEYS) {
    const why = CONFIG_SCHEMA[k].why;
    io.out(`${k.padEnd(width)}  ${String(r.config[k]).padEnd(12)}  ${r.source[k].padEnd(7)}  ${why}`);
  }
  return 0;
}
