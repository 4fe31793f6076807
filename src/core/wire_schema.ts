/**
 * The one schema library for what arrives from outside: TypeBox (`@sinclair/typebox`). One
 * definition is the TypeScript type (`Static`), the check (compiled once, by TypeCompiler) and the
 * JSON Schema (the definition is one: GET /schema serves OpenEnv's action, observation and state as
 * written). Its users: the OpenEnv routes (platform/node/serve/openenv.ts), custom WebLLM records
 * (llm/webllm/custom_records.ts) and OpenAI-compatible replies (llm/openai_wire.ts). What this module
 * adds to TypeBox:
 *   - own fields only: a value is checked as it is while Object.prototype carries none of the names
 *     the schema reads (one `in` test per name), else as a copy of its own fields on null-prototype
 *     objects, so a polluted prototype never fills in a field a value lacks (TypeBox reads
 *     `value.key` and `'key' in value`, which see the prototype);
 *   - failures as issues: one per place (its path as keys and list indices), extra fields first,
 *     each with the value found and the schema it failed; at most `max` kept, all counted; a union
 *     that an object (or list) failed, where exactly one member is an object (or list), is reported
 *     inside that member (`usage.completion_tokens`, not `usage` for `{object} or null`);
 *   - words: what a good value is (`expected`), from the schema or from what it says of itself under
 *     SAYS (a symbol key: never in its JSON Schema), so every message names the field, the value and
 *     what was expected.
 * No check walks deeper than its schema (an Unknown field is never walked), so a value nested
 * 100 000 deep is one failure, and the work is linear in the size of the JSON text the caller bounded.
 * Pure TypeScript (TypeCompiler builds each check once with `new Function`).
 */
import { Kind, type Static, type TSchema } from '@sinclair/typebox';
import { TypeCompiler, ValueErrorType, type TypeCheck } from '@sinclair/typebox/compiler';
import type { ValueError } from '@sinclair/typebox/errors';

/** The key under which a schema says what a failure of it means (see `saying`). */
const SAYS = Symbol('says');

/** What a schema says of itself when a value fails it. */
export interface Says {
  /** What a good value is, in words ("a whole number from 0 to 4294967295"); else derived (`expected`). */
  expected?: string;
  /** The failure's name where a protocol names them (pydantic's `type`, e.g. 'int_type'). */
  code?: string;
}

/** `schema` with what it says on failure; its JSON Schema is unchanged (a symbol key is never serialised). */
export function saying<T extends TSchema>(schema: T, says: Says): T {
  return { ...schema, [SAYS]: says };
}

/** What `schema` says of itself, if anything. */
export function says(schema: TSchema): Says | undefined {
  return (schema as { [SAYS]?: Says })[SAYS];
}

/** One failure: where, what kind, the value found and the schema it failed. */
export interface Issue {
  /** The path from the checked value: object keys and list indices ([] for the value itself). */
  loc: (string | number)[];
  /** 'missing': a required field is absent; 'extra': a field the object does not have; 'invalid': any other. */
  kind: 'missing' | 'extra' | 'invalid';
  /** The value found (undefined when missing). */
  value: unknown;
  /** The schema failed: the field's own ('missing', 'invalid') or its object's ('extra'). */
  schema: TSchema;
  /** The object the field sits in (undefined for the value itself). */
  parent: unknown;
}

/** The result of a read: the value (checked, own fields only) or its issues. */
export type WireRead<T> = { ok: true; value: T } | { ok: false; value: unknown; issues: Issue[]; total: number };

const NUMBER_KINDS = new Set(['Number', 'Integer']);
/** The kinds a wire schema may use; others would need their own rules here (names, depth, words). */
const KINDS = new Set([
  'Object',
  'Array',
  'Union',
  'String',
  'Number',
  'Integer',
  'Boolean',
  'Null',
  'Literal',
  'Unknown',
]);

/** Adds every property name `s` reads to `names`; returns how many object and list levels it reads. */
function walk(s: TSchema, names: Set<string>): number {
  const kind = s[Kind] as string;
  if (!KINDS.has(kind)) throw new Error(`wire_schema: a ${kind} schema is not supported (see KINDS)`);
  if (kind === 'Object') {
    let d = 0;
    for (const [k, p] of Object.entries(s.properties as Record<string, TSchema>)) {
      names.add(k);
      d = Math.max(d, walk(p, names));
    }
    return d + 1;
  }
  if (kind === 'Array') return walk(s.items as TSchema, names) + 1;
  if (kind === 'Union') return Math.max(0, ...(s.anyOf as TSchema[]).map((m) => walk(m, names)));
  return 0;
}

/** `v` with its objects, `depth` levels down, copied as their own fields onto null-prototype objects. */
function ownCopy(v: unknown, depth: number): unknown {
  if (depth <= 0 || typeof v !== 'object' || v === null) return v;
  if (Array.isArray(v)) return v.map((x: unknown) => ownCopy(x, depth - 1));
  const out = Object.create(null) as Record<string, unknown>;
  for (const k of Object.keys(v)) out[k] = ownCopy((v as Record<string, unknown>)[k], depth - 1);
  return out;
}

/** A JSON Pointer (TypeBox's error path) as keys and indices, and the object holding its last step. */
function locate(root: unknown, path: string): { loc: (string | number)[]; parent: unknown } {
  const loc: (string | number)[] = [];
  let at: unknown = root;
  let parent: unknown = undefined;
  if (path === '') return { loc, parent };
  for (const raw of path.slice(1).split('/')) {
    const key = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    parent = at;
    if (Array.isArray(at)) {
      loc.push(Number(key));
      at = at[Number(key)];
    } else {
      loc.push(key);
      at =
        typeof at === 'object' && at !== null && Object.hasOwn(at, key)
          ? (at as Record<string, unknown>)[key]
          : undefined;
    }
  }
  return { loc, parent };
}

/** Which member of a union's `anyOf` a value is an instance of, when it is an object or a list and one member is. */
function containerMember(members: TSchema[], value: unknown): number {
  const kind = Array.isArray(value) ? 'Array' : typeof value === 'object' && value !== null ? 'Object' : null;
  if (!kind) return -1;
  const at = members.flatMap((m, i) => (m[Kind] === kind ? [i] : []));
  return at.length === 1 ? at[0]! : -1;
}

/** TypeBox's errors, a union failed by an object or list reported inside its one object or list member. */
function* narrowed(errors: Iterable<ValueError>): Generator<ValueError> {
  for (const e of errors) {
    const i = e.type === ValueErrorType.Union ? containerMember(e.schema.anyOf as TSchema[], e.value) : -1;
    let inner = 0;
    if (i >= 0 && e.errors[i])
      for (const x of narrowed(e.errors[i])) {
        inner++;
        yield x;
      }
    if (inner === 0) yield e; // (the member failed, so it has an error; the union's own stands in if not)
  }
}

/** A schema compiled for values from outside: `read` checks one (own fields only) and says what is wrong. */
export class Wire<T extends TSchema> {
  private readonly check: TypeCheck<T>;
  /** Every property name the schema reads, and how many object and list levels deep it reads. */
  private readonly names: readonly string[];
  private readonly depth: number;

  constructor(readonly schema: T) {
    const names = new Set<string>();
    this.depth = walk(schema, names);
    this.names = [...names];
    this.check = TypeCompiler.Compile(schema);
  }

  /** True when `v` is good (own fields only); the fast test where the issues are not wanted. */
  test(v: unknown): v is Static<T> {
    return this.check.Check(this.view(v));
  }

  /**
   * `v` checked: `{ok: true, value}` (v itself, or its own-field copy when Object.prototype carries a
   * name the schema reads), else its issues: one per place, extra fields first, at most `max` of them
   * (`total` counts all).
   */
  read(v: unknown, max = Infinity): WireRead<Static<T>> {
    const value = this.view(v);
    if (this.check.Check(value)) return { ok: true, value };
    const extra: Issue[] = [];
    const rest: Issue[] = [];
    const seen = new Set<string>();
    let total = 0;
    for (const e of narrowed(this.check.Errors(value))) {
      // a missing field is also reported as a value of the wrong type: one issue per place
      if (seen.has(e.path)) continue;
      seen.add(e.path);
      total++;
      const kind =
        e.type === ValueErrorType.ObjectRequiredProperty
          ? 'missing'
          : e.type === ValueErrorType.ObjectAdditionalProperties
            ? 'extra'
            : 'invalid';
      const list = kind === 'extra' ? extra : rest;
      if (list.length >= max) continue;
      const { loc, parent } = locate(value, e.path);
      list.push({ loc, kind, value: kind === 'missing' ? undefined : e.value, schema: e.schema, parent });
    }
    return { ok: false, value, issues: [...extra, ...rest].slice(0, max), total };
  }

  /** `v`, or its own fields copied as deep as the schema reads when Object.prototype carries one of its names. */
  private view(v: unknown): unknown {
    for (const n of this.names) if (n in Object.prototype) return ownCopy(v, this.depth);
    return v;
  }
}

/** "a, b or c"; a part ending in a digit takes a comma before "or" ("from 0 to 2, or null"). */
function either(parts: string[]): string {
  if (parts.length <= 1) return parts[0] ?? 'nothing';
  const head = parts.slice(0, -1).join(', ');
  return `${head}${/\d$/.test(head) ? ',' : ''} or ${parts.at(-1)!}`;
}

/** A number schema's range in words: " from 0 to 5", " ≥ 0", " above 0", "". */
function range(s: TSchema): string {
  const lo = s.minimum as number | undefined;
  const hi = s.maximum as number | undefined;
  const above = s.exclusiveMinimum as number | undefined;
  if (lo !== undefined && hi !== undefined) return ` from ${lo} to ${hi}`;
  const parts = [
    ...(lo !== undefined ? [`≥ ${lo}`] : []),
    ...(above !== undefined ? [`above ${above}`] : []),
    ...(hi !== undefined ? [`≤ ${hi}`] : []),
  ];
  return parts.length ? ` ${parts.join(' and ')}` : '';
}

/** What a good value for `schema` is, in words: what it says of itself, else read off its kind and bounds. */
export function expected(schema: TSchema): string {
  const said = says(schema)?.expected;
  if (said) return said;
  const kind = schema[Kind] as string;
  if (kind === 'String')
    return schema.maxLength !== undefined ? `a string of at most ${schema.maxLength as number} characters` : 'a string';
  if (NUMBER_KINDS.has(kind)) return `${kind === 'Integer' ? 'a whole number' : 'a number'}${range(schema)}`;
  if (kind === 'Boolean') return 'true or false';
  if (kind === 'Null') return 'null';
  if (kind === 'Object') return 'an object';
  if (kind === 'Array') return 'an array';
  if (kind === 'Literal') return JSON.stringify(schema.const);
  if (kind === 'Union') return either((schema.anyOf as TSchema[]).map(expected));
  return 'any value';
}
