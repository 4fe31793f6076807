// core/wire_schema.ts, the one schema library (TypeBox) for what arrives from outside, and its
// users in spade serve (platform/node/serve/openenv.ts): one issue per place with extra fields
// first, paths as keys and indices, bounded lists with a total, words read off the schema, what a
// schema says of itself kept out of its JSON Schema, and own fields only under a polluted
// Object.prototype. The payloads sent match the observation schema GET /schema serves.
import { Type } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import { afterEach, describe, expect, it } from 'vitest';
import {
  parseAction,
  parseMessage,
  parseResetParams,
  parseStepRequest,
  ProtocolValidationError,
  resetPayload,
  SCHEMAS,
  stepPayload,
} from '../../src/platform/node/serve/openenv.ts';
import { expected, saying, Wire } from '../../src/core/wire_schema.ts';
import { MAX_PROBLEMS, validateCustomModel } from '../../src/core/llm/webllm/custom_records.ts';

afterEach(() => {
  expect(Object.getOwnPropertyNames(Object.prototype)).not.toContain('text');
});

/** Runs `fn` with Object.prototype carrying `key` (not enumerable, as a polluter's defineProperty does). */
function polluted<T>(key: string, value: unknown, fn: () => T): T {
  Object.defineProperty(Object.prototype, key, { value, configurable: true, writable: true });
  try {
    return fn();
  } finally {
    delete (Object.prototype as Record<string, unknown>)[key];
  }
}

const errorsOf = (fn: () => unknown) => {
  try {
    fn();
  } catch (err) {
    if (err instanceof ProtocolValidationError) return err.errors;
    throw err;
  }
  throw new Error('expected a ProtocolValidationError');
};

describe('Wire: issues', () => {
  const point = new Wire(
    Type.Object(
      { x: Type.Integer({ minimum: 0, maximum: 9 }), tags: Type.Optional(Type.Array(Type.String())) },
      { additionalProperties: false },
    ),
  );

  it('one issue per place (a missing field is not also of the wrong type), extra fields first', () => {
    const r = point.read({ tags: ['a', 5], 'a/b~c': 1 });
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.issues.map((i) => [i.kind, i.loc, i.value])).toEqual([
      ['extra', ['a/b~c'], 1],
      ['missing', ['x'], undefined],
      ['invalid', ['tags', 1], 5],
    ]);
    expect(r.issues[1]!.parent).toEqual({ tags: ['a', 5], 'a/b~c': 1 });
    expect(r.total).toBe(3);
  });

  it('a union an object failed is reported inside its one object member; two object members stay one issue', () => {
    const usage = new Wire(Type.Union([Type.Object({ n: Type.Union([Type.Integer(), Type.Null()]) }), Type.Null()]));
    const r = usage.read({ n: 1.5 });
    expect(r.ok ? null : r.issues.map((i) => [i.loc, expected(i.schema)])).toEqual([[['n'], 'a whole number or null']]);
    const r2 = usage.read('x');
    expect(r2.ok ? null : r2.issues.map((i) => [i.loc, expected(i.schema)])).toEqual([[[], 'an object or null']]);
    const either = new Wire(Type.Union([Type.Object({ a: Type.String() }), Type.Object({ b: Type.String() })]));
    const r3 = either.read({ a: 1 });
    expect(r3.ok ? null : r3.issues.map((i) => i.loc)).toEqual([[]]);
  });

  it('keeps at most `max` issues and counts them all', () => {
    const many = Object.fromEntries(Array.from({ length: 5000 }, (_, i) => [`k${i}`, i]));
    const r = point.read({ x: 1, ...many }, 20);
    expect(r.ok ? null : [r.issues.length, r.total]).toEqual([20, 5000]);
  });

  it('a good value is read as it is', () => {
    const v = { x: 3 };
    expect(point.read(v)).toEqual({ ok: true, value: v });
    expect(point.read(v).ok && point.read(v).value).toBe(v);
  });

  it('checks no deeper than its schema: a value nested 100 000 deep is one issue', () => {
    const deep = JSON.parse('['.repeat(100_000) + ']'.repeat(100_000)) as unknown;
    const r = point.read({ x: deep });
    expect(r.ok ? null : r.issues.map((i) => i.loc)).toEqual([['x']]);
  });

  it('refuses a kind it has no rules for', () => {
    expect(() => new Wire(Type.Record(Type.String(), Type.Number()))).toThrow(/not supported/);
  });
});

describe('Wire: own fields only', () => {
  const call = new Wire(Type.Object({ name: Type.String(), args: Type.Optional(Type.Object({ n: Type.Number() })) }));

  it('a field Object.prototype carries is absent: required ones are missing, optional ones unread', () => {
    polluted('name', 'from the prototype', () => {
      const r = call.read({});
      expect(r.ok ? null : r.issues.map((i) => [i.kind, i.loc])).toEqual([['missing', ['name']]]);
    });
    polluted('args', 'not an object', () => {
      expect(call.read({ name: 'f' }).ok).toBe(true);
    });
    polluted('n', 1, () => {
      const r = call.read({ name: 'f', args: {} });
      expect(r.ok ? null : r.issues.map((i) => [i.kind, i.loc])).toEqual([['missing', ['args', 'n']]]);
    });
  });

  it("spade serve's requests: a polluted prototype adds no text, data, name or reset field", () => {
    polluted('text', 5, () => {
      expect(parseAction({ tool_calls: [{ name: 'f' }] })).toEqual({
        text: '',
        toolCalls: [{ name: 'f', arguments: {} }],
      });
      expect(errorsOf(() => parseAction({}))[0]).toMatchObject({ type: 'missing', loc: ['text'] });
    });
    polluted('name', 'f', () => {
      expect(errorsOf(() => parseAction({ tool_calls: [{}] }))[0]).toMatchObject({ loc: ['tool_calls', 0] });
    });
    polluted('data', {}, () => {
      expect(errorsOf(() => parseMessage('step', { type: 'step' }))).toEqual([
        { type: 'missing', loc: ['data'], msg: 'Field required', input: { type: 'step' } },
      ]);
    });
    polluted('action', { text: 'x' }, () => {
      expect(errorsOf(() => parseStepRequest({}))[0]).toMatchObject({ type: 'missing', loc: ['body', 'action'] });
    });
    polluted('sample', 'regret', () => {
      expect(parseResetParams({ env_id: 'e' }).sample).toBeNull();
    });
  });
});

describe('words', () => {
  it('reads what a good value is off the schema, or takes what the schema says', () => {
    expect(expected(Type.Union([Type.Integer({ minimum: 0, maximum: 2 }), Type.Null()]))).toBe(
      'a whole number from 0 to 2, or null',
    );
    expect(expected(Type.Number({ exclusiveMinimum: 0 }))).toBe('a number above 0');
    expect(expected(Type.String({ maxLength: 5 }))).toBe('a string of at most 5 characters');
    expect(expected(Type.Union([Type.Literal('a'), Type.Literal('b'), Type.Boolean()]))).toBe(
      '"a", "b" or true or false',
    );
    expect(expected(saying(Type.String(), { expected: 'a name' }))).toBe('a name');
  });

  it('what a schema says of itself never shows in its JSON Schema', () => {
    const s = saying(Type.String({ title: 'Name' }), { expected: 'a name', code: 'name_type' });
    expect(JSON.parse(JSON.stringify(s))).toEqual({ type: 'string', title: 'Name' });
    expect(JSON.stringify(SCHEMAS)).not.toMatch(/a valid dictionary|model_type|int_type/);
  });
});

describe('custom WebLLM records (custom_records.ts)', () => {
  const good = {
    model_id: 'MyLlama-q4f32_1-MLC',
    model: 'https://huggingface.co/me/MyLlama-q4f32_1-MLC',
    model_lib: 'https://example.org/libs/MyLlama-q4f32_1-webgpu.wasm',
  };

  it('names the field, and what it must be, for a value of the wrong type', () => {
    expect(validateCustomModel({ ...good, model: 5, needs_f16: 1 })).toEqual({
      ok: false,
      errors: [
        'model must be an https:// URL (http:// is allowed only for localhost).',
        'needs_f16 must be true or false.',
      ],
    });
  });

  it('lists at most MAX_PROBLEMS problems and counts the rest, whatever fields are missing', () => {
    const many = Object.fromEntries(Array.from({ length: 10_000 }, (_, i) => [`k${i}`, i]));
    const r = validateCustomModel({ model_id: good.model_id, ...many });
    expect(r.ok ? [] : r.errors).toHaveLength(MAX_PROBLEMS + 1);
    expect(r.ok ? '' : r.errors.at(-1)).toBe(`${10_000 + 2 - MAX_PROBLEMS} more problem(s) left out.`);
  });

  it("reads the record's own fields: a polluted prototype fills in no URL", () => {
    polluted('model_lib', good.model_lib, () => {
      expect(validateCustomModel({ model_id: good.model_id, model: good.model })).toEqual({
        ok: false,
        errors: ['model_lib is required.'],
      });
    });
    polluted('vram_required_MB', -1, () => {
      expect(validateCustomModel(good)).toEqual({ ok: true, value: good });
    });
  });
});

describe("spade serve's schemas", () => {
  it('the action GET /schema serves is the one parseAction checks', () => {
    const served = JSON.parse(JSON.stringify(SCHEMAS)) as typeof SCHEMAS;
    expect(served.action.additionalProperties).toBe(false);
    expect(Object.keys(served.action.properties).sort()).toEqual(['metadata', 'text', 'tool_calls']);
    expect(Value.Check(SCHEMAS.action, { text: 'x', extra: 1 })).toBe(false);
    expect(errorsOf(() => parseAction({ text: 'x', extra: 1 }))[0]!.type).toBe('extra_forbidden');
  });

  it('reset and step payloads are observations as the schema has them', () => {
    const ep = { envId: 'e1', title: 'T', setting: 'games', skill: 's', difficulty: 'easy', seed: 3 };
    const reset = resetPayload(ep, 'hello', {}, [], null);
    const step = stepPayload(ep, 1, ['ok', 1, true, false, { note: 1 }]);
    for (const p of [reset, step]) expect(Value.Errors(SCHEMAS.observation, p.observation).First()).toBeUndefined();
    expect(Value.Check(SCHEMAS.observation, { ...(step.observation as object), surprise: 1 })).toBe(false);
  });
});
