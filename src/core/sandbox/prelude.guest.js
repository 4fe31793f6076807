/*
 * Sandbox prelude: evaluated inside QuickJS before any environment code.
 * It is guest code — it never runs on the host. It provides:
 *   - Math.random seeded per reset(seed) (sfc32), Date fixed at FIXED_NOW and in UTC, so episodes
 *     replay exactly on any machine;
 *   - a refusal of native array loops too long to fit in memory (the time limit cannot stop them);
 *   - extractBoxed(text): the content of the last \boxed{...} (nested braces allowed), or null;
 *   - ToolUseEnv: the base class for tool-use environments (see docs/environments.md);
 *   - __spade: the host's entry points, captured here before user code can tamper with builtins;
 *     they build every reply (and read every thrown value) inside the guest, under the call's limits.
 */
(function (global) {
  'use strict';
  // Every built-in the glue relies on, captured before user code can replace it. Methods are
  // "uncurried" (call(fn, self, ...args)) so later changes to Function.prototype.call do not matter.
  const uncurry = (fn) => Function.prototype.call.bind(fn);
  const stringify = JSON.stringify;
  const parse = JSON.parse;
  const ObjectDefine = Object.defineProperty;
  const ObjectCreate = Object.create;
  const ObjectFreeze = Object.freeze;
  const ObjectKeys = Object.keys;
  const isArray = Array.isArray;
  const isFiniteNumber = Number.isFinite;
  const toString = String;
  const ReflectApply = Reflect.apply;
  const ReflectConstruct = Reflect.construct;
  const MathMin = Math.min;
  const MathFloor = Math.floor;
  const imul = Math.imul;
  const strSlice = uncurry(String.prototype.slice);
  const strLastIndexOf = uncurry(String.prototype.lastIndexOf);
  const strTrim = uncurry(String.prototype.trim);
  const strPadStart = uncurry(String.prototype.padStart);
  const arrSlice = uncurry(Array.prototype.slice);
  const arrMap = uncurry(Array.prototype.map);
  const arrJoin = uncurry(Array.prototype.join);
  const arrFind = uncurry(Array.prototype.find);
  const reExec = uncurry(RegExp.prototype.exec);
  const FIXED_NOW = 1700000000000; // 2023-11-14T22:13:20Z: every "now" inside the sandbox
  /** A record the host reads: no prototype, so an inherited toJSON or getter cannot change it. */
  function record(fields) {
    const o = ObjectCreate(null);
    const keys = ObjectKeys(fields);
    for (let i = 0; i < keys.length; i++) o[keys[i]] = fields[keys[i]];
    return o;
  }

  // --- seeded randomness -------------------------------------------------------------
  let a = 0,
    b = 0,
    c = 0,
    d = 1;
  function seedRandom(seed) {
    let s = seed >>> 0;
    const mix = () => {
      s = (s + 0x9e3779b9) >>> 0;
      let z = s;
      z = imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
      z = imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
      return (z ^ (z >>> 16)) >>> 0;
    };
    a = mix();
    b = mix();
    c = mix();
    d = mix();
    for (let i = 0; i < 12; i++) random();
  }
  function random() {
    const t = (((a + b) >>> 0) + d) >>> 0;
    d = (d + 1) >>> 0;
    a = b ^ (b >>> 9);
    b = (c + (c << 3)) >>> 0;
    c = (c << 21) | (c >>> 11);
    c = (c + t) >>> 0;
    return t / 4294967296;
  }
  seedRandom(0);
  Math.random = random;

  // --- fixed clock, in UTC ---------------------------------------------------------------
  // "Now" is FIXED_NOW in every reachable form (Date(), new Date(), Date.now(),
  // Date.prototype.constructor, Reflect.construct, subclasses), and local time is UTC whatever
  // the host's time zone, so a seed replays the same transcript on every machine.
  const RealDate = Date;
  const DateProto = RealDate.prototype;
  const realParse = RealDate.parse;
  const realUTC = RealDate.UTC;
  const getTime = uncurry(DateProto.getTime);
  const setTime = uncurry(DateProto.setTime);
  const realOffset = uncurry(DateProto.getTimezoneOffset);
  const utcString = uncurry(DateProto.toUTCString);
  const getUTCHours = uncurry(DateProto.getUTCHours);
  const getUTCMonth = uncurry(DateProto.getUTCMonth);
  const getUTCFullYear = uncurry(DateProto.getUTCFullYear);
  const setUTCFullYear = uncurry(DateProto.setUTCFullYear);
  // a string names its zone, or is an ISO date alone (UTC by the standard); others read as UTC here
  const ZONED = /\dZ\b|\d[+-]\d\d:?\d\d\b|GMT|UTC|^\s*[+-]?\d{4,6}(?:-\d\d(?:-\d\d)?)?\s*$/i;
  function parseUTC(s) {
    const str = toString(s);
    const t = realParse(str);
    if (t !== t || reExec(ZONED, str) !== null) return t;
    return t - realOffset(new RealDate(t)) * 60000; // the engine read it as host-local time
  }
  function FixedDate(...args) {
    if (new.target === undefined) return dateString(new RealDate(FIXED_NOW), 0);
    let t;
    if (args.length === 0) t = FIXED_NOW;
    else if (args.length === 1) {
      const v = args[0];
      t = typeof v === 'string' ? parseUTC(v) : v instanceof RealDate ? getTime(v) : v;
    } else t = ReflectApply(realUTC, undefined, args);
    return ReflectConstruct(RealDate, [t], new.target);
  }
  const UTC_PARTS = /^(\w+), (\d+) (\w+) (-?\d+) (\d\d):(\d\d):(\d\d) GMT$/;
  const pad2 = (n) => strPadStart(toString(n), 2, '0');
  /** kind 0: toString, 1: toDateString, 2: toTimeString, 3: toLocaleString, 4: ...DateString, 5: ...TimeString */
  function dateString(d, kind) {
    const m = reExec(UTC_PARTS, utcString(d)); // "Tue, 14 Nov 2023 22:13:20 GMT"
    if (m === null) return 'Invalid Date';
    const date = m[1] + ' ' + m[3] + ' ' + m[2] + ' ' + m[4];
    const time = m[5] + ':' + m[6] + ':' + m[7] + ' GMT+0000';
    if (kind === 0) return date + ' ' + time;
    if (kind === 1) return date;
    if (kind === 2) return time;
    const h = getUTCHours(d);
    const ldate = pad2(getUTCMonth(d) + 1) + '/' + m[2] + '/' + m[4];
    const ltime = pad2(h % 12 === 0 ? 12 : h % 12) + ':' + m[6] + ':' + m[7] + (h < 12 ? ' AM' : ' PM');
    return kind === 3 ? ldate + ', ' + ltime : kind === 4 ? ldate : ltime;
  }
  const define = (obj, key, value) =>
    ObjectDefine(obj, key, { value, writable: true, configurable: true, enumerable: false });
  ObjectDefine(FixedDate, 'name', { value: 'Date', configurable: true });
  ObjectDefine(FixedDate, 'length', { value: 7, configurable: true });
  ObjectDefine(FixedDate, 'prototype', { value: DateProto, writable: false, configurable: false });
  define(FixedDate, 'now', () => FIXED_NOW);
  define(FixedDate, 'parse', (s) => parseUTC(s));
  define(FixedDate, 'UTC', realUTC);
  define(DateProto, 'constructor', FixedDate);
  const LOCAL = ['FullYear', 'Month', 'Date', 'Day', 'Hours', 'Minutes', 'Seconds', 'Milliseconds'];
  for (let i = 0; i < LOCAL.length; i++) {
    define(DateProto, 'get' + LOCAL[i], DateProto['getUTC' + LOCAL[i]]);
    if (LOCAL[i] !== 'Day') define(DateProto, 'set' + LOCAL[i], DateProto['setUTC' + LOCAL[i]]);
  }
  const NAMES = [
    'toString',
    'toDateString',
    'toTimeString',
    'toLocaleString',
    'toLocaleDateString',
    'toLocaleTimeString',
  ];
  for (let i = 0; i < NAMES.length; i++) {
    const kind = i;
    define(
      DateProto,
      NAMES[i],
      {
        [NAMES[i]]() {
          return dateString(new RealDate(getTime(this)), kind);
        },
      }[NAMES[i]],
    );
  }
  define(DateProto, 'getTimezoneOffset', function getTimezoneOffset() {
    const t = getTime(this);
    return t !== t ? t : 0;
  });
  define(DateProto, 'getYear', function getYear() {
    return getUTCFullYear(this) - 1900;
  });
  define(DateProto, 'setYear', function setYear(year) {
    const t = getTime(this);
    let y = +year;
    if (y !== y) return setTime(this, NaN);
    y = y < 0 ? -MathFloor(-y) : MathFloor(y);
    if (y >= 0 && y <= 99) y += 1900;
    const d = new RealDate(t !== t ? 0 : t);
    setUTCFullYear(d, y);
    return setTime(this, getTime(d));
  });
  global.Date = FixedDate;

  // --- native work bombs ------------------------------------------------------------------------
  // Array built-ins loop over `length` in C, where the time limit cannot interrupt them:
  // Array(2 ** 28).join('x') would run for many seconds. No array this long fits in the sandbox's
  // memory, so refuse at once; shorter native loops are the pool watchdog's job.
  const MAX_ARRAY_WORK = 16777216; // 2^24 elements
  const ArrayProto = Array.prototype;
  const GUARDED = [
    'join',
    'toLocaleString',
    'indexOf',
    'lastIndexOf',
    'includes',
    'reverse',
    'fill',
    'copyWithin',
    'sort',
    'splice',
    'slice',
    'forEach',
    'map',
    'filter',
    'every',
    'some',
    'reduce',
    'reduceRight',
    'find',
    'findIndex',
    'findLast',
    'findLastIndex',
    'flat',
    'flatMap',
    'shift',
    'unshift',
    'toReversed',
    'toSorted',
    'toSpliced',
    'with',
  ];
  for (let i = 0; i < GUARDED.length; i++) {
    const name = GUARDED[i];
    const orig = ArrayProto[name];
    if (typeof orig !== 'function') continue;
    const guarded = {
      [name]() {
        const len = this === null || this === undefined ? 0 : +this.length;
        if (len > MAX_ARRAY_WORK) {
          throw new RangeError(
            'Array.prototype.' +
              name +
              ' on a length of ' +
              len +
              ': the sandbox refuses array work over ' +
              MAX_ARRAY_WORK +
              ' elements (no such array fits in its memory). Use a smaller array.',
          );
        }
        return ReflectApply(orig, this, arguments);
      },
    }[name];
    ObjectDefine(guarded, 'length', { value: orig.length, configurable: true });
    define(ArrayProto, name, guarded);
  }

  // --- \boxed{...} extraction --------------------------------------------------------------
  // Keep in step with extractBoxed in src/core/env/contract.ts (a test checks they agree).
  function extractBoxed(text) {
    if (typeof text !== 'string') return null;
    const key = '\\boxed{';
    const start = strLastIndexOf(text, key);
    if (start < 0) return null;
    let depth = 1;
    for (let i = start + key.length; i < text.length; i++) {
      const ch = text[i];
      if (ch === '{') depth++;
      else if (ch === '}' && --depth === 0) return strTrim(strSlice(text, start + key.length, i));
    }
    return null;
  }
  global.extractBoxed = extractBoxed;

  function show(value) {
    if (typeof value === 'string') return value;
    try {
      return stringify(value);
    } catch (e) {
      return toString(value);
    }
  }

  // --- tool use base class -------------------------------------------------------------
  class ToolUseEnv {
    constructor(maxTurns = 10) {
      this.maxTurns = maxTurns;
      this.turn = 0;
      this.stage = 0;
      this.instructions = [];
      this.done = false;
    }
    /** Subclasses list tools as {name, description, parameters} in `static tools`. */
    toolList() {
      return this.constructor.tools || [];
    }
    /** OpenAI function schemas. */
    toolSchemas() {
      return arrMap(this.toolList(), (t) => ({
        type: 'function',
        function: {
          name: t.name,
          description: t.description || '',
          parameters: t.parameters || { type: 'object', properties: {} },
        },
      }));
    }
    /** Call at the end of reset(): sets the instructions and returns [observation, info]. */
    start(intro, instructions) {
      this.turn = 0;
      this.stage = 0;
      this.done = false;
      this.instructions = isArray(instructions) ? arrMap(instructions, (x) => toString(x)) : [toString(instructions)];
      // the reference solution as of reset, revealed later even if the agent changed the state
      try {
        this.plan = this.solution();
      } catch (e) {
        this.plan = null;
      }
      const tools = arrJoin(
        arrMap(this.toolList(), (t) => '- ' + t.name + ': ' + (t.description || '')),
        '\n',
      );
      const obs =
        toString(intro || '') +
        '\n\nTools:\n' +
        tools +
        '\n\nCall a tool with <tool_call>{"name": "...", "arguments": {...}}</tool_call>; ' +
        'give your final answer with <answer>...</answer>.' +
        '\n\n' +
        this.instructionText();
      return [obs, { tools: this.toolSchemas(), instruction: this.stage + 1, instructions: this.instructions.length }];
    }
    instructionText() {
      const n = this.instructions.length;
      return (n > 1 ? 'Instruction ' + (this.stage + 1) + ' of ' + n + ': ' : 'Task: ') + this.instructions[this.stage];
    }
    /** Override: is `answer` correct for instruction number `stage` (0-based)? */
    checkAnswer(_answer, _stage) {
      return false;
    }
    revealSolution() {
      const s = this.plan || this.solution();
      return isArray(s) ? arrJoin(s, '\n') : toString(s);
    }
    finish(obs, reward, terminated, truncated) {
      if (terminated || truncated) this.done = true;
      return [
        obs,
        reward,
        terminated,
        truncated,
        { turn: this.turn, instruction: MathMin(this.stage + 1, this.instructions.length) },
      ];
    }
    step(action) {
      if (this.done) return this.finish('The episode is over.', 0, true, false);
      this.turn++;
      const text = typeof action === 'string' ? action : '';
      const out = this.dispatch(text);
      if (!out[2] && this.turn >= this.maxTurns) {
        return this.finish(out[0] + '\n\nOut of turns. A solution was:\n' + this.revealSolution(), out[1], false, true);
      }
      return out;
    }
    dispatch(text) {
      const call = reExec(/<tool_call>([\s\S]*?)<\/tool_call>/, text);
      const answer = reExec(/<answer>([\s\S]*?)<\/answer>/, text);
      if (call && (!answer || call.index < answer.index)) {
        let req;
        try {
          req = parse(call[1]);
        } catch (e) {
          return this.finish(
            'Format error: the tool call is not valid JSON (' +
              e.message +
              '). Use {"name": "...", "arguments": {...}}.',
            -0.1,
            false,
            false,
          );
        }
        const name = req && typeof req.name === 'string' ? req.name : null;
        const tool = arrFind(this.toolList(), (t) => t.name === name);
        if (!tool || typeof this[name] !== 'function') {
          const names = arrJoin(
            arrMap(this.toolList(), (t) => t.name),
            ', ',
          );
          return this.finish(
            'Format error: unknown tool ' + stringify(name) + '. Available tools: ' + names + '.',
            -0.1,
            false,
            false,
          );
        }
        let args = req.arguments === undefined || req.arguments === null ? {} : req.arguments;
        if (typeof args === 'string') {
          // the OpenAI wire format sends arguments as a JSON string
          try {
            args = parse(args);
          } catch (e) {
            return this.finish(
              'Format error: "arguments" is a string that is not valid JSON (' + e.message + ').',
              -0.1,
              false,
              false,
            );
          }
        }
        if (typeof args !== 'object' || args === null || isArray(args)) {
          return this.finish(
            'Format error: "arguments" must be an object, e.g. {"name": "' + name + '", "arguments": {...}}.',
            -0.1,
            false,
            false,
          );
        }
        let result;
        try {
          result = this[name](args);
        } catch (e) {
          return this.finish(
            'Tool error (' + name + '): ' + (e && e.message ? e.message : toString(e)),
            0,
            false,
            false,
          );
        }
        return this.finish(
          'Tool result (' + name + '): ' + (result === undefined ? '(no result)' : show(result)),
          0,
          false,
          false,
        );
      }
      if (answer) {
        const given = strTrim(answer[1]);
        if (this.checkAnswer(given, this.stage)) {
          this.stage++;
          if (this.stage >= this.instructions.length)
            return this.finish('Correct. All instructions are complete.', 1, true, false);
          return this.finish(
            'Correct.\n\n' + this.instructionText(),
            this.stage / this.instructions.length,
            false,
            false,
          );
        }
        return this.finish(
          'Incorrect answer: ' + given + '. The episode ends. A solution was:\n' + this.revealSolution(),
          0,
          true,
          false,
        );
      }
      return this.finish(
        'Format error: reply with one <tool_call>{...}</tool_call> or a final <answer>...</answer>.',
        -0.1,
        false,
        false,
      );
    }
    solution() {
      return [];
    }
    close() {}
  }
  global.ToolUseEnv = ToolUseEnv;

  // --- host entry points -----------------------------------------------------------------
  // The host reads only strings these functions build; everything here runs under the call's
  // time and memory limits, including reading a hostile thrown value (getters, Proxies, toString).
  let env = null;
  let EnvClass = null;
  const cut = (s, n) => (s.length > n ? strSlice(s, 0, n) : s);
  /** {name, message, stack} of anything thrown, read with captured built-ins; never throws. */
  function errorRecord(e) {
    let name = 'Error';
    let message = 'an unprintable value was thrown';
    let stack = '';
    try {
      if (e === null || (typeof e !== 'object' && typeof e !== 'function')) {
        name = e === null ? 'thrown null' : 'thrown ' + typeof e;
        message = e === null ? 'null' : toString(e);
      } else {
        const n = e.name;
        const m = e.message;
        const st = e.stack;
        name = typeof n === 'string' ? n : typeof m === 'string' ? 'Error' : 'thrown object';
        message = typeof m === 'string' ? m : toString(e);
        if (typeof st === 'string') stack = st;
      }
    } catch (_) {
      /* a getter, trap or toString threw: keep what was read */
    }
    if (typeof name !== 'string') name = 'Error';
    if (typeof message !== 'string') message = 'an unprintable value was thrown';
    return record({ name: cut(name, 100), message: cut(message, 2000), stack: cut(stack, 2000) });
  }
  /** The host reads a value thrown outside the entry points (top-level code) through this. */
  function describe(e) {
    return stringify(errorRecord(e)); // a record of strings with no prototype: nothing to hijack
  }
  // NaN and ±Infinity would become null in JSON: list where they were (top-level slots only, e.g.
  // the reward) beside the value, so the host restores them and no string can pose as one.
  function reply(v) {
    const out = record({ ok: true, value: v });
    if (!isArray(v)) return out;
    let nonFinite = null;
    for (let i = 0; i < v.length; i++) {
      const x = v[i];
      if (typeof x === 'number' && !isFiniteNumber(x)) {
        if (nonFinite === null) {
          nonFinite = [];
          out.value = arrSlice(v);
        }
        // define, not assign: a setter planted on Array.prototype must not see it
        ObjectDefine(nonFinite, nonFinite.length, {
          value: [i, x !== x ? 'NaN' : x > 0 ? 'Infinity' : '-Infinity'],
          writable: true,
          enumerable: true,
          configurable: true,
        });
        out.value[i] = null;
      }
    }
    if (nonFinite !== null) out.nonFinite = nonFinite;
    return out;
  }
  function failure(e) {
    return stringify(record({ ok: false, error: errorRecord(e) }));
  }
  function wrap(fn) {
    try {
      return stringify(reply(fn()));
    } catch (e) {
      return failure(e);
    }
  }
  // Fast path for the common well-formed 5-tuple: JSON.stringify of the whole reply is the main
  // cost of a step in QuickJS, so serialise the fixed shape by hand, bare (the host reads an array
  // as this reply, a record as any other).
  function stepWith(action) {
    let v;
    try {
      v = env.step(action);
      if (
        isArray(v) &&
        v.length === 5 &&
        typeof v[0] === 'string' &&
        typeof v[1] === 'number' &&
        isFiniteNumber(v[1]) &&
        typeof v[2] === 'boolean' &&
        typeof v[3] === 'boolean' &&
        v[4] !== null &&
        typeof v[4] === 'object' &&
        !isArray(v[4])
      ) {
        const info = ObjectKeys(v[4]).length === 0 ? '{}' : stringify(v[4]);
        return '[' + stringify(v[0]) + ',' + v[1] + ',' + v[2] + ',' + v[3] + ',' + info + ']';
      }
      return stringify(reply(v));
    } catch (e) {
      return failure(e);
    }
  }
  const api = {
    /** classes: candidate constructors, last-declared first. Picks the first that is a function. */
    register(names, classes, maxTurns) {
      return wrap(() => {
        for (let i = 0; i < classes.length; i++) {
          if (typeof classes[i] === 'function') {
            EnvClass = classes[i];
            env = new EnvClass(maxTurns);
            const toolUse = env instanceof ToolUseEnv;
            return record({ className: names[i], toolUse, tools: toolUse ? env.toolSchemas() : [] });
          }
        }
        throw new Error('no class whose name ends in "Env" was found');
      });
    },
    reset(seed) {
      seedRandom(seed);
      return wrap(() => env.reset(seed));
    },
    /** The action as the host sent it: text without NUL or surrogates goes as is, other text as JSON. */
    step(text) {
      return stepWith(text);
    },
    stepJson(json) {
      let action;
      try {
        action = parse(json);
      } catch (e) {
        return failure(e);
      }
      return stepWith(action);
    },
    solution() {
      return wrap(() => env.solution());
    },
    close() {
      // what close() returns is ignored: only a throw (or running past the limit) counts
      return wrap(() => {
        if (typeof env.close === 'function') env.close();
        return null;
      });
    },
    describe,
  };
  ObjectDefine(global, '__spade', {
    value: ObjectFreeze(api),
    writable: false,
    configurable: false,
    enumerable: false,
  });
})(globalThis);
