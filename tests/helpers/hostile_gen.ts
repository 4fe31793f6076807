/**
 * A generator of hostile environment programs: families of attacks on the sandbox's
 * host and glue, combined at random from a fixed seed. Every program holds at least one
 * "fatal" family — one that must end in a typed error — and up to two more (tampered built-ins,
 * clock and time-zone probes, or another fatal family) placed anywhere: top level, the
 * constructor, reset, step or solution. tests/unit/hostile_gen.test.ts runs them through the pool.
 *
 * A clock probe that sees the real clock or the host's time zone throws "CLOCK LEAK", which the
 * test refuses as an outcome.
 */
import { createRng, type Rng } from '../../src/core/rng.ts';

/** Where a fragment of code runs. */
type Site = 'top' | 'ctor' | 'reset' | 'step' | 'solution';

interface Fragment {
  family: string;
  variant: string;
  /** Statements, placed at `site`. */
  code: string;
  site: Site;
  /** Actions the harness sends to step() (default: one plain action). */
  actions?: string[];
  /** Code that must replace reset's return value (the host reads it). */
  resetReturn?: string;
  stepReturn?: string;
}

export interface HostileProgram {
  name: string;
  families: string[];
  code: string;
  actions: string[];
}

const SITES: Site[] = ['top', 'ctor', 'reset', 'step', 'solution'];

/** Values whose reading runs guest code: getters, Proxy traps, toJSON, toString. */
const THROWN: [string, string][] = [
  ['toJSON loop', `(() => { const e = new Error('x'); e.toJSON = function () { for (;;) {} }; return e; })()`],
  ['inherited toJSON loop', `(Object.prototype.toJSON = function () { for (;;) {} }, new Error('x'))`],
  ['getter on name loops', `{ get name() { for (;;) {} }, message: 'm' }`],
  ['getter on message loops', `{ name: 'E', get message() { for (;;) {} } }`],
  ['getter on stack throws', `{ name: 'E', message: 'm', get stack() { throw new Error('no stack'); } }`],
  ['Proxy whose get loops', `new Proxy({}, { get() { for (;;) {} } })`],
  ['Proxy whose get throws', `new Proxy({}, { get() { throw new Error('trap'); } })`],
  ['toString loops', `{ toString() { for (;;) {} } }`],
  ['toString throws itself', `{ toString() { throw this; } }`],
  ['Symbol', `Symbol('s')`],
  ['BigInt', `123n`],
  ['Promise', `Promise.resolve(1)`],
  ['rejected Promise', `Promise.reject(new Error('r'))`],
  ['null', `null`],
  ['undefined', `undefined`],
  ['function with a looping name getter', `Object.defineProperty(function f() {}, 'name', { get() { for (;;) {} } })`],
  ['revoked Proxy', `(() => { const r = Proxy.revocable({}, {}); r.revoke(); return r.proxy; })()`],
  ['huge message', `new Error('m'.repeat(1 << 20))`],
];

/** Built-ins the glue (prelude and host) used to call, replaced before anything else runs. */
const TAMPER: [string, string][] = [
  ['Object.prototype.toJSON returns junk', `Object.prototype.toJSON = function () { return 7; };`],
  ['Array.prototype.slice loops', `Array.prototype.slice = function () { for (;;) {} };`],
  ['String.prototype.slice throws', `String.prototype.slice = function () { throw new Error('slice'); };`],
  ['JSON.stringify returns garbage', `JSON.stringify = () => '{"ok":true,"value":["pwned",{}]}';`],
  ['JSON.parse loops', `JSON.parse = function () { for (;;) {} };`],
  ['Array.isArray lies', `Array.isArray = () => true;`],
  ['Object.keys loops', `Object.keys = function () { for (;;) {} };`],
  ['Function.prototype.call throws', `Function.prototype.call = function () { throw new Error('call'); };`],
  ['Reflect.apply loops', `Reflect.apply = function () { for (;;) {} };`],
  [
    'setter on Object.prototype.ok',
    `Object.defineProperty(Object.prototype, 'ok', { set() { for (;;) {} }, configurable: true });`,
  ],
  [
    'setter on Array.prototype[0]',
    `Object.defineProperty(Array.prototype, '0', { set() { for (;;) {} }, configurable: true });`,
  ],
  ['RegExp.prototype.exec throws', `RegExp.prototype.exec = function () { throw new Error('exec'); };`],
  ['String.prototype.trim loops', `String.prototype.trim = function () { for (;;) {} };`],
  ['Math.imul throws', `Math.imul = function () { throw new Error('imul'); };`],
];

/** Replies whose reading by the glue runs guest code. */
const READS: [string, string][] = [
  ['tuple Proxy whose get loops', `new Proxy(['o', {}], { get() { for (;;) {} } })`],
  [
    'tuple Proxy whose get throws',
    `new Proxy(['o', {}], { get(t, k) { if (k === '1') throw new Error('trap'); return t[k]; } })`,
  ],
  ['info getter loops', `['o', { get x() { for (;;) {} } }]`],
  ['info getter throws', `['o', { get x() { throw new Error('getter'); } }]`],
  ['info toJSON loops', `['o', { toJSON() { for (;;) {} } }]`],
  ['info Proxy ownKeys loops', `['o', new Proxy({}, { ownKeys() { for (;;) {} } })]`],
  ['observation is a number', `[42, {}]`],
  ['observation toString loops', `[{ toString() { for (;;) {} } }, {}]`],
  ['tuple element getter loops', `Object.defineProperty(['o', {}], 1, { get() { for (;;) {} } })`],
];

/** Work that native code does without polling the interrupt handler, or that exhausts memory. */
const NATIVE: [string, string][] = [
  ['Array(2 ** 28).join', `Array(2 ** 28).join('x');`],
  ['Array(2 ** 32 - 1).indexOf', `Array(2 ** 32 - 1).indexOf(1);`],
  ['concat of a sparse 2^32 array', `[].concat(Array(2 ** 32 - 1));`],
  ['reverse of a huge array-like', `Array.prototype.reverse.call({ length: 2 ** 53 - 1 });`],
  ['repeat 2^29', `'x'.repeat(2 ** 29);`],
  ['fill 1e9', `new Array(1e9).fill(0);`],
  ['Map out of memory', `const m = new Map(); for (let i = 0; ; i++) m.set(i, [i, i, i, i]);`],
  ['catastrophic regex', `/(a+)+$/.test('a'.repeat(40) + 'b');`],
  ['doubling string', `let s = 'x'; for (;;) s += s;`],
];

const FLOODS: [string, string][] = [
  ['endless then chain', `const f = () => Promise.resolve().then(f); f();`],
  ['then flood in a loop', `for (;;) Promise.resolve().then(() => 0);`],
  ['await in an endless async loop', `(async () => { for (;;) await null; })();`],
  ['job that loops', `Promise.resolve().then(() => { for (;;) {} });`],
];

function deep(rng: Rng): string {
  const n = 150 + rng.int(5000);
  const [o, c] = rng.pick([
    ['[', ']'],
    ['(', ')'],
    ['{a:', '}'],
  ]);
  return o.repeat(n) + '0' + c.repeat(n);
}

/** One fragment of a family chosen at random; `fatal` families always end in an error. */
function fatal(rng: Rng): Fragment {
  const family = rng.pick(['thrown', 'reads', 'nesting', 'native', 'flood', 'thrown']);
  const site = rng.pick(SITES);
  switch (family) {
    case 'thrown': {
      const [variant, value] = rng.pick(THROWN);
      return { family, variant, site, code: `throw ${value};` };
    }
    case 'reads': {
      const [variant, value] = rng.pick(READS);
      return rng.next() < 0.5
        ? { family, variant, site: 'reset', code: '', resetReturn: value }
        : { family, variant: `${variant} (step)`, site: 'step', code: '', stepReturn: stepTuple(value) };
    }
    case 'nesting': {
      const kind = rng.pick(['source', 'action', 'long action', 'runtime JSON.parse', 'runtime eval']);
      if (kind === 'source') return { family, variant: kind, site, code: `void ${deep(rng)};` };
      if (kind === 'action')
        return {
          family,
          variant: kind,
          site: 'step',
          code: '',
          actions: [`<tool_call>{"name": "t", "arguments": {"a": ${'['.repeat(200 + rng.int(20000))}1}}</tool_call>`],
        };
      if (kind === 'long action')
        return { family, variant: kind, site: 'step', code: '', actions: ['x'.repeat(70_000)] };
      // built at run time, so no source check can see it: the host's stack may overflow and the
      // module restart (a typed error naming the cause), or QuickJS stops it first
      const text = `'['.repeat(100000) + ']'.repeat(100000)`;
      return {
        family,
        variant: kind,
        site: rng.pick(['reset', 'step'] as Site[]),
        code: kind === 'runtime eval' ? `eval(${text});` : `JSON.parse(${text});`,
      };
    }
    case 'native': {
      const [variant, code] = rng.pick(NATIVE);
      return { family, variant, site: rng.pick(['reset', 'step', 'top'] as Site[]), code };
    }
    default: {
      const [variant, code] = rng.pick(FLOODS);
      return { family: 'flood', variant, site: rng.pick(['reset', 'step', 'top'] as Site[]), code };
    }
  }
}

const stepTuple = (resetLike: string): string =>
  `(() => { const r = ${resetLike}; return [r[0], 0, false, false, r[1]]; })()`;

/** A probe of the guest clock: throws "CLOCK LEAK" if it sees real time or the host's zone. */
function clockProbe(rng: Rng): Fragment {
  const probes: [string, string][] = [
    ['Date.prototype.constructor', `new (Date.prototype.constructor)().getTime() === 1700000000000`],
    ['Reflect.construct', `Reflect.construct(Date, []).getTime() === 1700000000000`],
    ['Date() as a function', `Date() === 'Tue Nov 14 2023 22:13:20 GMT+0000'`],
    ['subclass', `new (class extends Date {})().getTime() === 1700000000000`],
    ['getTimezoneOffset', `new Date(2020, 6, 1).getTimezoneOffset() === 0`],
    [
      'local fields',
      `new Date(2020, 0, 1, 12).getHours() === 12 && new Date(2020, 0, 1, 12).toISOString() === '2020-01-01T12:00:00.000Z'`,
    ],
    ['toString', `String(new Date(0)) === 'Thu Jan 01 1970 00:00:00 GMT+0000'`],
    ['toLocaleString', `new Date(0).toLocaleString() === '01/01/1970, 12:00:00 AM'`],
    ['parse without a zone', `Date.parse('2020-01-01T00:00:00') === Date.UTC(2020, 0, 1)`],
  ];
  const [variant, test] = rng.pick(probes);
  return {
    family: 'clock',
    variant,
    site: rng.pick(SITES),
    code: `if (!(${test})) throw new Error('CLOCK LEAK: ${variant}');`,
  };
}

function tamper(rng: Rng): Fragment {
  const [variant, code] = rng.pick(TAMPER);
  return { family: 'tamper', variant, site: 'top', code };
}

/** `count` programs from `seed`; the same seed gives the same programs. */
export function hostilePrograms(seed: number, count: number): HostileProgram[] {
  const rng = createRng(seed);
  const out: HostileProgram[] = [];
  for (let i = 0; i < count; i++) {
    const parts: Fragment[] = [fatal(rng)];
    const extra = rng.int(3);
    for (let k = 0; k < extra; k++) parts.push(rng.pick([tamper, clockProbe, fatal, clockProbe])(rng));
    // side families run first, so a probe or a tamper is in place before the fatal part
    const ordered = [...parts.slice(1), parts[0]!];
    out.push({
      name: `#${i} ${parts.map((p) => `${p.family}: ${p.variant}@${p.site}`).join(' + ')}`,
      families: parts.map((p) => p.family),
      ...programOf(ordered),
    });
  }
  return out;
}

/** The environment source (and its actions) for fragments in the order they run. */
function programOf(ordered: Fragment[]): { code: string; actions: string[] } {
  const at = (site: Site) =>
    ordered
      .filter((p) => p.site === site && p.code)
      .map((p) => p.code)
      .join('\n');
  const resetReturn = ordered.find((p) => p.resetReturn)?.resetReturn ?? `['start', {}]`;
  const stepReturn = ordered.find((p) => p.stepReturn)?.stepReturn ?? `['o', 0, false, false, {}]`;
  const code = `${at('top')}
class GenEnv extends ToolUseEnv {
  static tools = [{ name: 't', description: 'a tool', parameters: { type: 'object', properties: {} } }];
  constructor(maxTurns) { super(maxTurns); ${at('ctor')} }
  t(args) { return 'ok'; }
  reset(seed) { ${at('reset')}
    return ${resetReturn}; }
  step(action) { ${at('step')}
    const r = super.step(action); return ${stepReturn === `['o', 0, false, false, {}]` ? 'r' : stepReturn}; }
  solution() { ${at('solution')}
    return ['<answer>1</answer>']; }
}`;
  const actions = ordered.find((p) => p.actions)?.actions ?? ['<tool_call>{"name": "t", "arguments": {}}</tool_call>'];
  return { code, actions };
}

/**
 * Every value whose reading runs guest code, each in its own program: each THROWN value thrown at
 * each site, each READS reply from reset and from step, each TAMPER at the top. Interruptible only
 * (no NATIVE or FLOODS family), so an in-process host with no watchdog contains all of them.
 */
export function guestReadPrograms(): HostileProgram[] {
  const one = (f: Fragment): HostileProgram => ({
    name: `${f.family}: ${f.variant}@${f.site}`,
    families: [f.family],
    ...programOf([f]),
  });
  return [
    ...THROWN.flatMap(([variant, value]) =>
      SITES.map((site) => one({ family: 'thrown', variant, site, code: `throw ${value};` })),
    ),
    ...READS.flatMap(([variant, value]) => [
      one({ family: 'reads', variant, site: 'reset', code: '', resetReturn: value }),
      one({ family: 'reads', variant, site: 'step', code: '', stepReturn: stepTuple(value) }),
    ]),
    ...TAMPER.map(([variant, code]) => one({ family: 'tamper', variant, site: 'top', code })),
  ];
}
