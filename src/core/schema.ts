/**
 * Schemas for untrusted JSON: small combinators that are at once a reader (decode: check every
 * field, type and range, and build a fresh value of only the known fields) and a TypeScript type
 * (`Infer<typeof S>`), so a record's type and its validator are one table and cannot drift.
 *
 * The one vocabulary for everything the project describes: run records, stored records, and every
 * setting a person, a flag or a link chooses. A setting is a `Field`: a scalar schema (`int`, `num`,
 * `oneOf`, `text`: each says its kind, range or values, so a form, a help text and a link parser can
 * read them) with its default, the reason for that default and, when a link carries it, its key in
 * the link. The config (config.ts), the Lab's settings (lab/settings.ts), the link keys
 * (url_state.ts) and the defaults outside those tables (defaults.ts) are tables of Fields.
 *
 * A failure names the path of the bad value (`archive[3].stats.regret must be a number from -2 to
 * 2.`) and is thrown as the error the caller's `Reader` builds. Fields of an object:
 *   - `opt(s)`: may be absent (undefined, or null where `s` has no null); absent stays absent, or
 *     becomes `fill()` when one is given;
 *   - `dflt(s, v)`: required in the type, read as `v` when absent (a field older files lack);
 *   - `transient<T>()`: kept in memory (e.g. training tokens) but never read from a file.
 */

/** Where a value sits, e.g. `rollouts[2].turns[0]`; '' for the root. */
export type Path = string;

/** How a failure becomes an error: the message names the path; `root` names the top object. */
export interface Reader {
  fail(message: string, path: Path): never;
  /** A root field's own path is shown as `${root}.field` (its children's as `field[0]…`). */
  root?: string;
  /** What the data is, for messages ("a run file"). */
  document?: string;
}

export interface Schema<T> {
  /** The value read from `v` at `at`; throws through `r.fail` at the first bad value. */
  decode(v: unknown, at: Path, r: Reader): T;
  /** What a good value is, in words ("a number from 0 to 1"), for messages. */
  readonly what: string;
  /** The same, for a list of them ("numbers from 0 to 1"); set on scalars only. */
  readonly plural?: string;
  /** The value is a scalar whose check needs no path (a list of them fails as a whole). */
  readonly test?: (v: unknown) => boolean;
  /** null is a good value. */
  readonly nullable?: boolean;
}

export type Infer<S> = S extends Schema<infer T> ? T : never;

/** `path.key`, or just `key` at the root. */
const child = (at: Path, key: string): Path => (at === '' ? key : `${at}.${key}`);

/** The path as a message shows it: a root field is prefixed with the reader's root name. */
export function shown(at: Path, r: Reader): string {
  if (!r.root) return at || '$';
  if (at === '') return r.root;
  return /[.[]/.test(at) ? at : `${r.root}.${at}`;
}

const failAt = (r: Reader, at: Path, what: string): never => r.fail(`${shown(at, r)} must be ${what}.`, at);

function scalar<T>(what: string, plural: string, test: (v: unknown) => boolean): Schema<T> {
  return {
    what,
    plural,
    test,
    decode: (v, at, r) => (test(v) ? (v as T) : failAt(r, at, what)),
  };
}

/** A whole number, or any number, in [min, max]: a setting's kind and range, readable by a form. */
export interface RangeSchema extends Schema<number> {
  readonly kind: 'int' | 'number';
  readonly min: number;
  readonly max: number;
}
/** One of a fixed set of strings. */
export interface EnumSchema<T extends string> extends Schema<T> {
  readonly kind: 'enum';
  readonly values: readonly T[];
}
/** A string of at most `maxLength` characters (a link's payload, a name). */
export interface TextSchema extends Schema<string> {
  readonly kind: 'text';
  readonly maxLength: number;
}
/** The schemas a setting can have. */
export type ScalarSchema = RangeSchema | EnumSchema<string> | TextSchema;

export const str = (): Schema<string> => scalar('a string', 'strings', (v) => typeof v === 'string');

/** A string of at most `maxLength` characters. */
export const text = (maxLength: number): TextSchema => ({
  ...scalar<string>(
    `a string of at most ${maxLength} characters`,
    `strings of at most ${maxLength} characters`,
    (v) => typeof v === 'string' && v.length <= maxLength,
  ),
  kind: 'text',
  maxLength,
});

export const bool = (): Schema<boolean> =>
  scalar('true or false', 'true or false values', (v) => typeof v === 'boolean');

/** A number in [lo, hi] (JSON has no NaN; Infinity, from 1e999, is out of every range). */
export const num = (lo: number, hi: number): RangeSchema => ({
  ...scalar<number>(
    `a number from ${lo} to ${hi}`,
    `numbers from ${lo} to ${hi}`,
    (v) => typeof v === 'number' && v >= lo && v <= hi,
  ),
  kind: 'number',
  min: lo,
  max: hi,
});

/** A whole number in [lo, hi]: counts, indices and cycles (lo is 0 for every count). */
export const int = (lo: number, hi: number): RangeSchema => ({
  ...scalar<number>(
    `a whole number from ${lo} to ${hi}`,
    `whole numbers from ${lo} to ${hi}`,
    (v) => typeof v === 'number' && Number.isInteger(v) && v >= lo && v <= hi,
  ),
  kind: 'int',
  min: lo,
  max: hi,
});

/** One of a fixed set of strings. */
export const oneOf = <const T extends string>(options: readonly T[]): EnumSchema<T> => ({
  ...scalar<T>(`one of ${options.join(', ')}`, `values among ${options.join(', ')}`, (v) =>
    (options as readonly unknown[]).includes(v),
  ),
  kind: 'enum',
  values: options,
});

/** Exactly this value (a format tag or version). */
export const literal = <const T extends string | number>(value: T): Schema<T> =>
  scalar(JSON.stringify(value), JSON.stringify(value), (v) => v === value);

/** The value or null; absent (undefined) reads as null. */
export function orNull<T>(s: Schema<T>): Schema<T | null> {
  // a range ends with a number: a comma keeps "… to 2, or null" from running together
  const what = `${s.what}${/\d$/.test(s.what) ? ',' : ''} or null`;
  return {
    what,
    nullable: true,
    decode: (v, at, r) => {
      if (v === null || v === undefined) return null;
      if (s.test && !s.test(v)) return failAt(r, at, what);
      return s.decode(v, at, r);
    },
  };
}

/** A list of `item`s; `unique` refuses two items with the same key, naming both. */
export function list<T>(
  item: Schema<T>,
  opts: { unique?: (x: T) => [key: string, words: string]; what?: string } = {},
): Schema<T[]> {
  const what = opts.what ?? 'a list';
  return {
    what,
    decode: (v, at, r) => {
      if (!Array.isArray(v)) return failAt(r, at, item.test ? `a list of ${item.plural}` : what);
      let out: T[];
      if (item.test) {
        // a list of scalars is checked, and refused, as a whole
        if (!v.every(item.test)) return failAt(r, at, `a list of ${item.plural}`);
        out = v.slice() as T[];
      } else out = v.map((x, i) => item.decode(x, `${at}[${i}]`, r));
      if (opts.unique) {
        const seen = new Map<string, number>();
        const name = shown(at, { ...r, root: undefined });
        out.forEach((x, i) => {
          const [key, words] = opts.unique!(x);
          const first = seen.get(key);
          if (first !== undefined)
            r.fail(
              `${name}[${i}] repeats ${name}[${first}] (${words}); each appears once in ${r.document ?? 'the file'}. It was rejected.`,
              `${at}[${i}]`,
            );
          seen.set(key, i);
        });
      }
      return out;
    },
  };
}

/** An object of string keys to values of one schema (the keys were screened by the caller). */
export function record<T>(value: Schema<T>): Schema<Record<string, T>> {
  return {
    what: 'an object',
    decode: (v, at, r) => {
      if (!isObject(v)) return failAt(r, at, 'an object');
      return Object.fromEntries(Object.keys(v).map((k) => [k, value.decode(v[k], child(at, k), r)]));
    },
  };
}

/** Read with `s`, then turn the value into another (the type follows the function). */
export function map<T, U>(s: Schema<T>, fn: (v: T, at: Path, r: Reader) => U): Schema<U> {
  return { what: s.what, nullable: s.nullable, decode: (v, at, r) => fn(s.decode(v, at, r), at, r) };
}

/** A value read by a hand-written function (for values another module validates). */
export function custom<T>(what: string, decode: (v: unknown, at: Path, r: Reader) => T): Schema<T> {
  return { what, decode };
}

// --- objects ---------------------------------------------------------------------------------

const OPTIONAL = Symbol('optional');
const TRANSIENT = Symbol('transient');

/** A field that may be absent (see the header); the type marks it `?`. */
export interface Opt<T> extends Schema<T | undefined> {
  readonly [OPTIONAL]: true;
  readonly inner: Schema<T>;
  readonly fill?: () => T;
}

/** A field of the in-memory record that a file never carries. */
export interface Transient<T> {
  readonly [TRANSIENT]: T | undefined;
}

export function opt<T>(s: Schema<T>, fill?: () => T): Opt<T> {
  return {
    [OPTIONAL]: true,
    inner: s,
    ...(fill ? { fill } : {}),
    what: s.what,
    decode: (v, at, r) => (v === undefined || (v === null && !s.nullable) ? fill?.() : s.decode(v, at, r)),
  };
}

/** Required in the type; an absent field (undefined) reads as `value`. */
export function dflt<T>(s: Schema<T>, value: T): Schema<T> {
  return { what: s.what, decode: (v, at, r) => (v === undefined ? value : s.decode(v, at, r)) };
}

export const transient = <T>(): Transient<T> => ({ [TRANSIENT]: undefined });

type ShapeField = Schema<unknown> | Opt<unknown> | Transient<unknown>;
export type Shape = Record<string, ShapeField>;

type OptionalKeys<S extends Shape> = {
  [K in keyof S]: S[K] extends Opt<unknown> | Transient<unknown> ? K : never;
}[keyof S];
type FieldType<F> =
  F extends Opt<infer T> ? T : F extends Transient<infer T> ? T : F extends Schema<infer T> ? T : never;
/** One flat object type (not an intersection), so types compare equal field by field. */
type Flat<T> = { [K in keyof T]: T[K] };
type InferShape<S extends Shape> = Flat<
  { [K in Exclude<keyof S, OptionalKeys<S>>]: FieldType<S[K]> } & { [K in OptionalKeys<S>]?: FieldType<S[K]> }
>;

export type ObjectSchema<S extends Shape> = Schema<InferShape<S>> & { readonly shape: S };

export const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * `table[key]` when `key` is the table's own property, else undefined: the one lookup of a table by
 * a key that comes from outside (a --set flag, a --config file, a link, a record, an error's name
 * from a worker). A plain `table[key]` also finds Object.prototype's members (`constructor`,
 * `toString`, `__proto__`…), so `--set constructor=1` once passed as a setting; a field a record
 * lacks is never read off a polluted prototype either.
 */
export function ownField<T extends object>(table: T, key: string): T[keyof T] | undefined {
  return Object.hasOwn(table, key) ? ((table as Record<string, unknown>)[key] as T[keyof T]) : undefined;
}

/** An object of these fields, read in order; unknown keys (a newer app's) are left out. */
export function object<const S extends Shape>(shape: S): ObjectSchema<S> {
  const entries = Object.entries(shape).filter(([, f]) => !(TRANSIENT in f)) as [string, Schema<unknown>][];
  return {
    shape,
    what: 'an object',
    decode: (v, at, r) => {
      if (!isObject(v)) return failAt(r, at, 'an object');
      // read from the value's own fields and written as own fields (fromEntries defines them), so
      // Object.prototype neither fills in a field the value lacks nor blocks one being set
      const out: [string, unknown][] = [];
      for (const [k, f] of entries) {
        const value = f.decode(ownField(v, k), child(at, k), r);
        if (value !== undefined || !(OPTIONAL in f)) out.push([k, value]);
      }
      return Object.fromEntries(out) as InferShape<S>;
    },
  };
}

/** Read untrusted data with a schema; `at` is the root's path. */
export function decode<T>(s: Schema<T>, data: unknown, r: Reader, at: Path = ''): T {
  return s.decode(data, at, r);
}

/** True when A and B are the same type (compile-time; for assertions that two types cannot drift). */
export type Equal<A, B> = (<X>() => X extends A ? 1 : 2) extends <X>() => X extends B ? 1 : 2 ? true : false;

// --- settings ---------------------------------------------------------------------------------

/**
 * A setting: its schema, its default, the reason for that default and, when a link carries it, its
 * key in the link. The schema's kind (`int`, `number`, `enum`, `text`) and range or values are the
 * Field's own properties too, so `CONFIG_SCHEMA.seed.max` reads as before.
 */
export type Field<S extends Schema<unknown> = ScalarSchema> = S & {
  readonly default: Infer<S>;
  readonly why: string;
  /** Its key in a link (the location hash); absent: no link carries it. */
  readonly url?: string;
};

/** A Field from a schema and what a table says of it. */
export function field<const S extends Schema<unknown>, const U extends string | undefined = undefined>(
  schema: S,
  meta: { default: Infer<S>; why: string; url?: U },
): S & { readonly default: Infer<S>; readonly why: string; readonly url: U } {
  return { ...schema, default: meta.default, why: meta.why, url: meta.url as U };
}

/** A value in words for a message: numbers as written (NaN, Infinity), strings and the rest as JSON. */
function showValue(value: unknown): string {
  return typeof value === 'number' ? String(value) : (JSON.stringify(value) ?? String(value));
}

/**
 * What is wrong with `value` for the setting `name` (null when it is good), in the words forms,
 * flags and links show: "seed must be between 0 and 4294967295; got -3".
 */
export function fieldProblem(name: string, f: ScalarSchema, value: unknown): string | null {
  if (f.kind === 'enum') {
    if (typeof value !== 'string' || !f.values.includes(value))
      return `${name} must be one of ${f.values.join(', ')}; got ${showValue(value)}`;
    return null;
  }
  if (f.kind === 'text') {
    if (typeof value !== 'string') return `${name} must be text; got ${showValue(value)}`;
    if (value.length > f.maxLength)
      return `${name} is ${value.length.toLocaleString('en')} characters long; it may be at most ${f.maxLength.toLocaleString('en')}`;
    return null;
  }
  if (typeof value !== 'number' || !Number.isFinite(value)) return `${name} must be a number; got ${showValue(value)}`;
  if (f.kind === 'int' && !Number.isInteger(value)) return `${name} must be a whole number; got ${value}`;
  if (value < f.min || value > f.max) return `${name} must be between ${f.min} and ${f.max}; got ${value}`;
  return null;
}

/** A setting's value from the text of a link or a flag: a number for a range, the text itself otherwise. */
export function fromText(f: ScalarSchema, raw: string): unknown {
  if (f.kind !== 'int' && f.kind !== 'number') return raw;
  const n = Number(raw);
  return raw.trim() === '' || Number.isNaN(n) ? raw : n;
}

/** Parse a setting from text (a link's or a flag's): its value, or the problem in words. */
export function parseField(
  name: string,
  f: ScalarSchema,
  raw: string,
): { ok: true; value: unknown } | { ok: false; message: string } {
  const value = fromText(f, raw);
  const problem = fieldProblem(name, f, value);
  return problem ? { ok: false, message: problem } : { ok: true, value };
}

/** The defaults of a table of Fields, by key. */
export function defaultsOf<const T extends Record<string, { readonly default: unknown }>>(
  table: T,
): { -readonly [K in keyof T]: T[K]['default'] } {
  return Object.fromEntries(Object.entries(table).map(([k, f]) => [k, f.default])) as {
    -readonly [K in keyof T]: T[K]['default'];
  };
}
