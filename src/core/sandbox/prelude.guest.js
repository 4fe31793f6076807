/*
 * Sandbox prelude: evaluated inside QuickJS before any environment code.
 * It is guest code — it never runs on the host. It provides:
 *   - Math.random seeded per reset(seed) (sfc32), Date fixed at FIXED_NOW, so episodes replay exactly;
 *   - extractBoxed(text): the content of the last \boxed{...} (nested braces allowed), or null;
 *   - ToolUseEnv: the base class for tool-use environments (see docs/environments.md);
 *   - __spade: the host's entry points, captured here before user code can tamper with builtins.
 */
(function (global) {
  'use strict';
  const stringify = JSON.stringify;
  const parse = JSON.parse;
  const ObjectDefine = Object.defineProperty;
  const FIXED_NOW = 1700000000000; // 2023-11-14T22:13:20Z: every "now" inside the sandbox

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
      z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
      z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
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

  // --- fixed clock ---------------------------------------------------------------------
  const RealDate = Date;
  function FixedDate(...args) {
    if (!new.target) return new RealDate(FIXED_NOW).toString();
    return args.length === 0 ? new RealDate(FIXED_NOW) : new RealDate(...args);
  }
  FixedDate.prototype = RealDate.prototype;
  FixedDate.now = () => FIXED_NOW;
  FixedDate.parse = RealDate.parse;
  FixedDate.UTC = RealDate.UTC;
  global.Date = FixedDate;

  // --- \boxed{...} extraction --------------------------------------------------------------
  function extractBoxed(text) {
    if (typeof text !== 'string') return null;
    const key = '\\boxed{';
    const start = text.lastIndexOf(key);
    if (start < 0) return null;
    let depth = 1;
    for (let i = start + key.length; i < text.length; i++) {
      const ch = text[i];
      if (ch === '{') depth++;
      else if (ch === '}' && --depth === 0) return text.slice(start + key.length, i).trim();
    }
    return null;
  }
  global.extractBoxed = extractBoxed;

  function show(value) {
    if (typeof value === 'string') return value;
    try {
      return stringify(value);
    } catch (e) {
      return String(value);
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
      return this.toolList().map((t) => ({
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
      this.instructions = Array.isArray(instructions) ? instructions.map(String) : [String(instructions)];
      // the reference solution as of reset, revealed later even if the agent changed the state
      try {
        this.plan = this.solution();
      } catch (e) {
        this.plan = null;
      }
      const tools = this.toolList()
        .map((t) => '- ' + t.name + ': ' + (t.description || ''))
        .join('\n');
      const obs =
        String(intro || '') +
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
      return Array.isArray(s) ? s.join('\n') : String(s);
    }
    finish(obs, reward, terminated, truncated) {
      if (terminated || truncated) this.done = true;
      return [
        obs,
        reward,
        terminated,
        truncated,
        { turn: this.turn, instruction: Math.min(this.stage + 1, this.instructions.length) },
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
      const call = /<tool_call>([\s\S]*?)<\/tool_call>/.exec(text);
      const answer = /<answer>([\s\S]*?)<\/answer>/.exec(text);
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
        const tool = this.toolList().find((t) => t.name === name);
        if (!tool || typeof this[name] !== 'function') {
          const names = this.toolList()
            .map((t) => t.name)
            .join(', ');
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
        if (typeof args !== 'object' || args === null || Array.isArray(args)) {
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
          return this.finish('Tool error (' + name + '): ' + (e && e.message ? e.message : String(e)), 0, false, false);
        }
        return this.finish(
          'Tool result (' + name + '): ' + (result === undefined ? '(no result)' : show(result)),
          0,
          false,
          false,
        );
      }
      if (answer) {
        const given = answer[1].trim();
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
  let env = null;
  let EnvClass = null;
  function errorRecord(e) {
    let name = 'Error';
    let message;
    try {
      name =
        e && typeof e.name === 'string'
          ? e.name
          : e === null
            ? 'thrown null'
            : typeof e === 'object'
              ? 'Error'
              : 'thrown ' + typeof e;
      message = e && typeof e.message === 'string' ? e.message : String(e);
    } catch (_) {
      message = 'an unprintable value was thrown';
    }
    return { name: name.slice(0, 100), message: message.slice(0, 2000) };
  }
  // NaN and ±Infinity would become null in JSON; tag top-level ones (the reward) so the host
  // can report them exactly. A replacer would see every key and cost a third of a step.
  function tagNonFinite(v) {
    if (!Array.isArray(v)) return v;
    for (let i = 0; i < v.length; i++) {
      if (typeof v[i] === 'number' && !isFinite(v[i])) {
        const copy = v.slice();
        for (let j = i; j < copy.length; j++)
          if (typeof copy[j] === 'number' && !isFinite(copy[j])) copy[j] = '\u0000' + String(copy[j]);
        return copy;
      }
    }
    return v;
  }
  function wrap(fn) {
    try {
      return stringify({ ok: true, value: tagNonFinite(fn()) });
    } catch (e) {
      return stringify({ ok: false, error: errorRecord(e) });
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
            return {
              className: names[i],
              toolUse: env instanceof ToolUseEnv,
              tools: env instanceof ToolUseEnv ? env.toolSchemas() : [],
            };
          }
        }
        throw new Error('no class whose name ends in "Env" was found');
      });
    },
    reset(seed) {
      seedRandom(seed);
      return wrap(() => env.reset(seed));
    },
    step(action) {
      // Fast path for the common well-formed 5-tuple: JSON.stringify of the whole reply is the
      // main cost of a step in QuickJS, so serialise the fixed shape by hand.
      let v;
      try {
        v = env.step(action);
      } catch (e) {
        return stringify({ ok: false, error: errorRecord(e) });
      }
      if (
        Array.isArray(v) &&
        v.length === 5 &&
        typeof v[0] === 'string' &&
        typeof v[1] === 'number' &&
        isFinite(v[1]) &&
        typeof v[2] === 'boolean' &&
        typeof v[3] === 'boolean' &&
        v[4] !== null &&
        typeof v[4] === 'object'
      ) {
        let info = '{}';
        for (const _k in v[4]) {
          info = null;
          break;
        }
        try {
          if (info === null) info = stringify(v[4]);
          return '{"ok":true,"value":[' + stringify(v[0]) + ',' + v[1] + ',' + v[2] + ',' + v[3] + ',' + info + ']}';
        } catch (e) {
          return stringify({ ok: false, error: errorRecord(e) });
        }
      }
      return wrap(() => v);
    },
    solution() {
      return wrap(() => env.solution());
    },
    close() {
      return wrap(() => (typeof env.close === 'function' ? env.close() : undefined));
    },
  };
  ObjectDefine(global, '__spade', {
    value: Object.freeze(api),
    writable: false,
    configurable: false,
    enumerable: false,
  });
})(globalThis);
