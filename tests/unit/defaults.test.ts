// One Field vocabulary (core/schema.ts) for every setting and default: the config, the Lab's
// settings, the link keys and the defaults outside those tables (core/defaults.ts). Each Field's
// default passes its own schema, says why, and the places that use a default read it from its table.
import { describe, expect, it } from 'vitest';
import { main } from '../../src/cli/spade.ts';
import { CONFIG_SCHEMA } from '../../src/core/config.ts';
import {
  FRESH_MODEL_FIELDS,
  LOCAL_CHAT_FIELDS,
  LORA_FIELDS,
  SCHEDULER_DEFAULTS,
  SCHEDULER_FIELDS,
  SERVE_FIELDS,
} from '../../src/core/defaults.ts';
import { LAB_SCHEMA } from '../../src/core/lab/settings.ts';
import { decode, fieldProblem, type Field, type ScalarSchema, type Schema } from '../../src/core/schema.ts';
import { APP_LINK_FIELDS, LINK_KEYS } from '../../src/core/url_state.ts';
import { DecodeScheduler } from '../../src/engine/model/batch.ts';

const TABLES: Record<string, Record<string, Schema<unknown> & { default: unknown; why: string; url?: string }>> = {
  config: CONFIG_SCHEMA,
  lab: LAB_SCHEMA,
  link: APP_LINK_FIELDS,
  serve: SERVE_FIELDS,
  scheduler: SCHEDULER_FIELDS,
  localChat: LOCAL_CHAT_FIELDS,
  lora: LORA_FIELDS,
  freshModel: FRESH_MODEL_FIELDS,
};

const fail = (m: string): never => {
  throw new Error(m);
};

describe('one Field vocabulary', () => {
  it.each(Object.entries(TABLES))('%s: every default passes its own schema and carries a reason', (_, table) => {
    for (const [k, f] of Object.entries(table)) {
      expect(() => decode(f, f.default, { fail }), k).not.toThrow();
      expect(f.why.length, k).toBeGreaterThan(15);
      if ('kind' in f) expect(fieldProblem(k, f as unknown as ScalarSchema, f.default), k).toBeNull();
    }
  });

  it('every link key is a Field with its own key, and no two share one', () => {
    const urls = LINK_KEYS.map((k) => k.field.url);
    expect(urls.every((u) => typeof u === 'string')).toBe(true);
    expect(new Set(urls).size).toBe(urls.length);
    expect(urls.slice(0, 2)).toEqual(['panel', 'theme']);
    expect(urls.filter((u) => u!.startsWith('lab.'))).toHaveLength(Object.keys(LAB_SCHEMA).length);
  });

  it('one message for a bad value, whichever table the Field is in', () => {
    const seed: Field = CONFIG_SCHEMA.seed;
    expect(fieldProblem('seed', seed, -3)).toBe('seed must be between 0 and 4294967295; got -3');
    expect(fieldProblem('lab.K', LAB_SCHEMA.levels, 9)).toBe('lab.K must be between 1 and 8; got 9');
    expect(fieldProblem('port', SERVE_FIELDS.port, 2.5)).toBe('port must be a whole number; got 2.5');
    expect(fieldProblem('panel', APP_LINK_FIELDS.panel, 'x')).toMatch(/^panel must be one of run, environments/);
  });

  // Each user is checked against the Field it reads, never against a value computed from the same
  // table (such a line cannot fail); where the user reads its table when called, the table is
  // changed first, so a literal copy of today's value in the user fails.
  it('the scheduler takes its defaults from SCHEDULER_DEFAULTS when it is built', () => {
    const saved = { ...SCHEDULER_DEFAULTS };
    const changed = { maxBatch: 3, prefillBudget: 77, prefixCacheTokens: 123, stepsPerReadback: 2 };
    Object.assign(SCHEDULER_DEFAULTS, changed);
    try {
      // the constructor reads only the model's shape (to check the KV format): the options and their defaults
      const model = { cfg: { numLayers: 1, numKvHeads: 1, headDim: 16 } };
      const s = new DecodeScheduler(model as never) as unknown as Record<keyof typeof changed, number>;
      expect({
        maxBatch: s.maxBatch,
        prefillBudget: s.prefillBudget,
        prefixCacheTokens: s.prefixCacheTokens,
        stepsPerReadback: s.stepsPerReadback,
      }).toStrictEqual(changed);
    } finally {
      Object.assign(SCHEDULER_DEFAULTS, saved);
    }
  });

  it("a run's settings with no flag, preset or link are each config Field's default, named as such", async () => {
    const out: string[] = [];
    expect(await main(['config', 'show', '--json'], { out: (l) => out.push(l), err: (l) => out.push(l) })).toBe(0);
    const shown = JSON.parse(out.at(-1)!) as { config: Record<string, unknown>; source: Record<string, string> };
    expect(Object.keys(shown.config).sort()).toEqual(Object.keys(CONFIG_SCHEMA).sort());
    for (const [k, f] of Object.entries(CONFIG_SCHEMA)) {
      expect(shown.config[k], k).toStrictEqual(f.default);
      expect(shown.source[k], k).toBe('default');
    }
  });

  it("`spade serve --help` states each flag's default from SERVE_FIELDS, and the loop's maxTurns for --max-turns", async () => {
    const lines: string[] = [];
    expect(await main(['serve', '--help'], { out: (l) => lines.push(l), err: (l) => lines.push(l) })).toBe(0);
    const line = (flag: string) =>
      lines
        .join('\n')
        .split('\n')
        .find((l) => l.trimStart().startsWith(`--${flag} `));
    expect(line('host')).toContain(`(default: ${SERVE_FIELDS.host.default})`);
    expect(line('port')).toContain(`(default: ${SERVE_FIELDS.port.default})`);
    expect(line('idle-timeout')).toContain(`(default: ${SERVE_FIELDS.idleTimeoutS.default})`);
    // an episode served is as long as one the loop plays
    expect(line('max-turns')).toContain(`(default: ${CONFIG_SCHEMA.maxTurns.default})`);
  });
});
