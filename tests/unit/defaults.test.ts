// One Field vocabulary (core/schema.ts) for every setting and default: the config, the Lab's
// settings, the link keys and the defaults outside those tables (core/defaults.ts). Each Field's
// default passes its own schema, says why, and the places that use a default read it from its table.
import { describe, expect, it } from 'vitest';
import { main } from '../../src/cli/spade.ts';
import { CONFIG_SCHEMA, DEFAULTS } from '../../src/core/config.ts';
import {
  FRESH_MODEL_FIELDS,
  LOCAL_CHAT_FIELDS,
  LORA_FIELDS,
  SCHEDULER_DEFAULTS,
  SCHEDULER_FIELDS,
  SERVE_DEFAULTS,
  SERVE_FIELDS,
} from '../../src/core/defaults.ts';
import { LAB_SCHEMA, labDefaults } from '../../src/core/lab/settings.ts';
import { decode, fieldProblem, type Field, type ScalarSchema, type Schema } from '../../src/core/schema.ts';
import { APP_LINK_FIELDS, LINK_KEYS } from '../../src/core/url_state.ts';
import { toyModel } from '../../src/engine/lab/toy_train.ts';
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

  it('the tables are what their users read: DEFAULTS, labDefaults, the server and the scheduler', async () => {
    expect(DEFAULTS.seed).toBe(CONFIG_SCHEMA.seed.default);
    expect(labDefaults().seed).toBe(LAB_SCHEMA.seed.default);
    expect(SERVE_DEFAULTS.maxTurns).toBe(DEFAULTS.maxTurns);
    expect(SCHEDULER_DEFAULTS.maxBatch).toBe(SCHEDULER_FIELDS.maxBatch.default);
    // a scheduler asked for nothing takes the table's batch
    const toy = await toyModel('01', { seed: 1, layers: 1, hidden: 16 });
    expect(new DecodeScheduler(toy.llm).maxBatch).toBe(SCHEDULER_DEFAULTS.maxBatch);
    const lines: string[] = [];
    expect(await main(['serve', '--help'], { out: (l) => lines.push(l), err: (l) => lines.push(l) })).toBe(0);
    const help = lines.join('\n');
    expect(help).toContain(`(default: ${SERVE_DEFAULTS.port})`);
    expect(help).toContain(`(default: ${SERVE_DEFAULTS.idleTimeoutS})`);
    expect(help).toContain(`(default: ${SERVE_DEFAULTS.host})`);
  });
});
