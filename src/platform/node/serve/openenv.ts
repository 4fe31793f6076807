/**
 * OpenEnv's wire protocol as `spade serve` speaks it (docs/scale-out.md names the OpenEnv commit it
 * follows): the WebSocket message types and error codes, the observation payload ({observation,
 * reward, done}), and every request a client sends — the reset and step bodies, the /ws messages,
 * the SPADE action — as one TypeBox schema each (core/wire_schema.ts), which is at once the check,
 * the pydantic-shaped error list (field, value, what was expected) and, for the action, the
 * observation and the state, the JSON Schema GET /schema serves. Pure: no sockets, no sandbox.
 */
import { Kind, Type, type SchemaOptions, type Static, type TSchema } from '@sinclair/typebox';
import type { Info, StepResult, ToolSchema } from '../../../core/env/contract.ts';
import { ownField } from '../../../core/schema.ts';
import { expected, saying, says, Wire, type Issue, type Says } from '../../../core/wire_schema.ts';

/** The error codes of OpenEnv's WSErrorCode. */
export const WS_ERROR = {
  invalidJson: 'INVALID_JSON',
  unknownType: 'UNKNOWN_TYPE',
  validation: 'VALIDATION_ERROR',
  execution: 'EXECUTION_ERROR',
  capacity: 'CAPACITY_REACHED',
  factory: 'FACTORY_ERROR',
  session: 'SESSION_ERROR',
} as const;

/** One entry of a pydantic ValidationError.errors() list, as OpenEnv sends it. */
export interface FieldError {
  type: string;
  loc: (string | number)[];
  msg: string;
  input: unknown;
}

/** The sampling rules a reset may name instead of an environment id. */
export const SAMPLE_RULES = ['uniform', 'regret', 'learnability'] as const;
export type SampleRule = (typeof SAMPLE_RULES)[number];

/** What a reset asks for: OpenEnv's ResetRequest fields plus SPADE's own (unknown extras are ignored, as OpenEnv does). */
export interface ResetParams {
  seed: number | null;
  episodeId: string | null;
  envId: string | null;
  sample: SampleRule | null;
  hint: boolean;
}

/** A SPADE action: the agent's text, and/or tool calls rendered as the agent writes them. */
export interface SpadeAction {
  text: string;
  toolCalls: { name: string; arguments: unknown }[];
}

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Deepest level of a client's value echoed back in an error's `input` (deeper levels are summarised). */
const ECHO_DEPTH = 3;
/** Most items of a list (or keys of an object) echoed back; the rest are counted. */
const ECHO_ITEMS = 8;
/** Longest string (or key) echoed back: enough to recognise the value, never the client's whole payload. */
const ECHO_CHARS = 200;
/** Most entries of one validation error list (an object of 100 000 extra keys is one line, not 100 000). */
const MAX_FIELD_ERRORS = 20;

const cut = (s: string): string => (s.length > ECHO_CHARS ? `${s.slice(0, ECHO_CHARS)}… (${s.length} characters)` : s);

/**
 * A client's value as an error echoes it: at most ECHO_DEPTH levels, ECHO_ITEMS items per level
 * and ECHO_CHARS per string, so what is sent back is small whatever was received (a 20 000-deep
 * list is `[[["[list of 1]"]]]`). Built on a null-prototype object, so a `__proto__` key is data.
 */
function echo(v: unknown, depth = 0): unknown {
  if (typeof v === 'string') return cut(v);
  if (v === null || typeof v === 'number' || typeof v === 'boolean') return v;
  if (typeof v !== 'object') return `(${typeof v})`;
  if (Array.isArray(v)) {
    if (depth >= ECHO_DEPTH) return `[list of ${v.length}]`;
    const out: unknown[] = v.slice(0, ECHO_ITEMS).map((x) => echo(x, depth + 1));
    if (v.length > ECHO_ITEMS) out.push(`… ${v.length - ECHO_ITEMS} more`);
    return out;
  }
  const keys = Object.keys(v);
  if (depth >= ECHO_DEPTH) return `{object of ${keys.length} key${keys.length === 1 ? '' : 's'}}`;
  const out = Object.create(null) as Record<string, unknown>;
  for (const k of keys.slice(0, ECHO_ITEMS)) out[cut(k)] = echo((v as Record<string, unknown>)[k], depth + 1);
  if (keys.length > ECHO_ITEMS) out['…'] = `${keys.length - ECHO_ITEMS} more key(s)`;
  return out;
}

/** A value for a message: its echo as one line of JSON text, at most ECHO_CHARS long. */
export function describe(v: unknown): string {
  return cut(JSON.stringify(echo(v)) ?? String(v));
}

/**
 * Thrown by the validators below; `errors` is the pydantic-shaped list sent to the client, with
 * every echoed `input` and `loc` key bounded (echo) and at most MAX_FIELD_ERRORS entries; `total`
 * counts the errors found when `errors` holds only the first of them.
 */
export class ProtocolValidationError extends Error {
  readonly errors: FieldError[];
  constructor(errors: FieldError[], total = errors.length) {
    const kept = errors.slice(0, MAX_FIELD_ERRORS).map((e) => ({
      ...e,
      loc: e.loc.map((k) => (typeof k === 'string' ? cut(k) : k)),
      input: echo(e.input),
    }));
    const left = Math.max(total, errors.length) - kept.length;
    if (left > 0)
      kept.push({
        type: 'too_many_errors',
        loc: [],
        msg: `${left} more error(s) left out`,
        input: null,
      });
    super(kept.map((e) => `${e.loc.join('.')}: ${e.msg}`).join('; '));
    this.name = 'ProtocolValidationError';
    this.errors = kept;
  }
}

/** The longest reply (JSON characters) sent: far above any observation the sandbox lets out (64 KiB). */
const MAX_REPLY_CHARS = 16 * 2 ** 20;

/**
 * A reply as JSON text, never a throw: a value that cannot be encoded (a cycle, a BigInt, nesting
 * past the stack) or whose text is over MAX_REPLY_CHARS becomes `fallback(reason)` instead.
 */
export function encodeReply(body: unknown, fallback: (reason: string) => unknown): string {
  let text: string | undefined;
  let reason = '';
  try {
    text = JSON.stringify(body);
  } catch (err) {
    reason = `the reply could not be encoded (${err instanceof Error ? err.name : 'error'})`;
  }
  if (text !== undefined && text.length > MAX_REPLY_CHARS) {
    reason = `the reply was over ${MAX_REPLY_CHARS} characters`;
    text = undefined;
  }
  return text ?? JSON.stringify(fallback(reason || 'the reply was empty'));
}

// --- the requests: one TypeBox schema each (core/wire_schema.ts) ------------------------------

/** pydantic's error type for a value of the wrong kind (a schema may name its own: Says.code). */
const PYDANTIC_TYPES: Record<string, string> = {
  String: 'string_type',
  Integer: 'int_type',
  Number: 'float_type',
  Boolean: 'bool_type',
  Object: 'dict_type',
  Array: 'list_type',
  Literal: 'literal_error',
};

/** The pydantic error type of a failed schema: its own, else its kind's (a union: its first member but null). */
function pydanticType(s: TSchema): string {
  const code = says(s)?.code;
  if (code) return code;
  if (s[Kind] === 'Union') {
    const member = (s.anyOf as TSchema[]).find((m) => m[Kind] !== 'Null');
    return member ? pydanticType(member) : 'none_required';
  }
  return ownField(PYDANTIC_TYPES, s[Kind] as string) ?? 'value_error';
}

/** Issues (wire_schema.ts) as pydantic's error list: a missing field echoes the object it is missing from. */
function fieldErrors(issues: Issue[], prefix: (string | number)[]): FieldError[] {
  return issues.map((i): FieldError => {
    const loc = [...prefix, ...i.loc];
    if (i.kind === 'missing') return { type: 'missing', loc, msg: 'Field required', input: i.parent };
    if (i.kind === 'extra')
      return { type: 'extra_forbidden', loc, msg: 'Extra inputs are not permitted', input: i.value };
    return { type: pydanticType(i.schema), loc, msg: `Input should be ${expected(i.schema)}`, input: i.value };
  });
}

/** Read `data` with `wire`; a bad value throws its pydantic-shaped errors, at `prefix`. */
function readOrThrow<T extends TSchema>(wire: Wire<T>, data: unknown, prefix: (string | number)[]) {
  const r = wire.read(data, MAX_FIELD_ERRORS);
  if (!r.ok) throw new ProtocolValidationError(fieldErrors(r.issues, prefix), r.total);
  return r.value;
}

const DICT: Says = { code: 'dict_type', expected: 'a valid dictionary' };
/** A JSON object whose fields are not read. */
const anyObject = (options: SchemaOptions = {}) => Type.Object({}, { additionalProperties: true, ...options });
/** A string of at most 255 characters (ids), or null. */
const id255 = () => Type.Union([Type.String({ maxLength: 255 }), Type.Null()]);

/**
 * ResetRequest (HTTP) or a reset message's data (WebSocket): seed a whole number from 0 to 2³² − 1,
 * episode_id a string of at most 255 characters, env_id a string, sample one of SAMPLE_RULES, hint a
 * boolean; each may be null. Other keys are allowed and ignored.
 */
const RESET_REQUEST = new Wire(
  saying(
    Type.Object(
      {
        seed: Type.Optional(Type.Union([Type.Integer({ minimum: 0, maximum: 2 ** 32 - 1 }), Type.Null()])),
        episode_id: Type.Optional(id255()),
        env_id: Type.Optional(saying(id255(), { expected: 'an environment id from GET /metadata, or null' })),
        sample: Type.Optional(
          saying(Type.Union([...SAMPLE_RULES.map((r) => Type.Literal(r)), Type.Null()]), { code: 'enum' }),
        ),
        hint: Type.Optional(saying(Type.Union([Type.Boolean(), Type.Null()]), { expected: 'true, false or null' })),
      },
      { additionalProperties: true },
    ),
    { code: 'model_attributes_type', expected: 'a valid dictionary' },
  ),
);

/** OpenEnv's StepRequest: the action (read by parseAction), timeout_s above 0, request_id; other keys reset the instance. */
const STEP_REQUEST = new Wire(
  saying(
    Type.Object(
      {
        action: Type.Unknown(),
        timeout_s: Type.Optional(
          saying(Type.Union([Type.Number({ exclusiveMinimum: 0 }), Type.Null()]), { code: 'greater_than' }),
        ),
        request_id: Type.Optional(id255()),
      },
      { additionalProperties: true },
    ),
    { code: 'model_attributes_type', expected: 'a valid dictionary' },
  ),
);

/** The /ws messages a client sends, by type (OpenEnv's WSMessage models): no other fields. */
const WS_MESSAGES = {
  reset: new Wire(
    Type.Object(
      { type: Type.Literal('reset'), data: Type.Optional(saying(anyObject(), DICT)) },
      { additionalProperties: false },
    ),
  ),
  step: new Wire(Type.Object({ type: Type.Literal('step'), data: Type.Unknown() }, { additionalProperties: false })),
  state: new Wire(Type.Object({ type: Type.Literal('state') }, { additionalProperties: false })),
  close: new Wire(Type.Object({ type: Type.Literal('close') }, { additionalProperties: false })),
};
export type WsMessageType = keyof typeof WS_MESSAGES;

/** True when `type` is a /ws message type (own keys only: "constructor" is not one). */
export function isWsMessageType(type: unknown): type is WsMessageType {
  return typeof type === 'string' && Object.hasOwn(WS_MESSAGES, type);
}

/** A /ws message of a known type, checked: no extra fields, a reset's data a dictionary, a step's data present. */
export function parseMessage(type: WsMessageType, m: unknown): { data?: unknown } {
  return readOrThrow(WS_MESSAGES[type] as Wire<TSchema>, m, []) as { data?: unknown };
}

/** Reset parameters from a ResetRequest body (HTTP) or a reset message's data (WebSocket); see RESET_REQUEST. */
export function parseResetParams(data: unknown, prefix: (string | number)[] = ['body']): ResetParams {
  if (data === undefined || data === null) data = {};
  const r = RESET_REQUEST.read(data, MAX_FIELD_ERRORS);
  const errors = r.ok ? [] : fieldErrors(r.issues, prefix);
  let total = r.ok ? 0 : r.total;
  // the one rule between fields, which a JSON Schema of the request does not carry
  const v = r.value as { env_id?: unknown; sample?: unknown };
  if (isObj(v) && v.env_id != null && v.sample != null) {
    errors.push({
      type: 'value_error',
      loc: [...prefix, 'sample'],
      msg: 'Give env_id or sample, not both',
      input: v.sample,
    });
    total++;
  }
  if (!r.ok || errors.length) throw new ProtocolValidationError(errors, total);
  const ok = r.value;
  return {
    seed: ok.seed ?? null,
    episodeId: ok.episode_id ?? null,
    envId: ok.env_id ?? null,
    sample: ok.sample ?? null,
    hint: ok.hint ?? false,
  };
}

/** OpenEnv's POST /step body: the action, and the reset parameters its other keys give (a fresh instance). */
export function parseStepRequest(data: unknown): { action: SpadeAction; params: ResetParams } {
  const body = readOrThrow(STEP_REQUEST, data, ['body']) as Record<string, unknown>;
  const action = parseAction(body.action, ['body', 'action']);
  const params = parseResetParams(
    Object.fromEntries(
      Object.keys(body)
        .filter((k) => !Object.hasOwn(STEP_REQUEST.schema.properties, k))
        .map((k) => [k, body[k]]),
    ),
  );
  return { action, params };
}

/**
 * Deepest nesting of a tool call's arguments: the sandbox refuses actions nested past MAX_NESTING
 * (100) anyway, and a value this deep is never a real call; refusing it here keeps re-encoding it
 * (actionText) off the stack's edge.
 */
const MAX_ARGUMENT_DEPTH = 64;

/** True when `v` has lists or objects nested more than `max` deep (iterative: no recursion on hostile input). */
function nestedPast(v: unknown, max: number): boolean {
  const stack: [unknown, number][] = [[v, 1]];
  while (stack.length) {
    const [x, d] = stack.pop()!;
    if (typeof x !== 'object' || x === null) continue;
    if (d > max) return true;
    for (const c of Array.isArray(x) ? x : Object.values(x))
      if (typeof c === 'object' && c !== null) stack.push([c, d + 1]);
  }
  return false;
}

/** A tool call's fields: its name, and its arguments as an object or that object's JSON text. */
const TOOL_CALL_FIELDS = {
  name: Type.String(),
  arguments: Type.Optional(Type.Union([anyObject(), Type.String(), Type.Null()])),
};
/** OpenAI's form of a tool call: {type: "function", function: {name, arguments}} (its other fields unread). */
const OPENAI_TOOL_CALL = new Wire(Type.Object({ function: Type.Object(TOOL_CALL_FIELDS) }));

/**
 * A SpadeAction: {text?, tool_calls?, metadata?}, nothing else (OpenEnv's Action model forbids extra
 * fields); at least one of text and tool_calls. A tool call is {name, arguments} or OpenAI's
 * {type: "function", function: {name, arguments}}, arguments an object or its JSON text. The
 * schema GET /schema serves as `action`.
 */
const ACTION = new Wire(
  saying(
    Type.Object(
      {
        metadata: Type.Optional(saying(anyObject({ title: 'Metadata' }), DICT)),
        text: Type.Optional(saying(Type.String({ title: 'Text', default: '' }), { expected: 'a valid string' })),
        tool_calls: Type.Optional(
          saying(
            Type.Array(
              saying(Type.Union([Type.Object(TOOL_CALL_FIELDS), OPENAI_TOOL_CALL.schema]), {
                code: 'value_error',
                expected:
                  'a tool call: {"name": string, "arguments": object or its JSON text}, or OpenAI\'s {"type": "function", "function": {"name": ..., "arguments": ...}}',
              }),
              { title: 'Tool Calls' },
            ),
            { expected: 'a valid list' },
          ),
        ),
      },
      {
        title: 'SpadeAction',
        description:
          "The agent's reply. Games read the last \\boxed{...} in text; tool-use environments read one <tool_call>{...}</tool_call> or a final <answer>...</answer>. tool_calls are appended to text in that form.",
        additionalProperties: false,
      },
    ),
    { code: 'model_type', expected: 'a valid dictionary or instance of SpadeAction' },
  ),
);

/** A SpadeAction from an action dict (ACTION), its tool calls' JSON-text arguments parsed. */
export function parseAction(data: unknown, prefix: (string | number)[] = []): SpadeAction {
  const r = ACTION.read(data, MAX_FIELD_ERRORS);
  const errors = r.ok ? [] : fieldErrors(r.issues, prefix);
  let total = r.ok ? 0 : r.total;
  // the one rule between fields, which the JSON Schema does not carry
  const v = r.value as { text?: unknown; tool_calls?: unknown };
  if (isObj(v) && v.text === undefined && v.tool_calls === undefined) {
    errors.push({ type: 'missing', loc: [...prefix, 'text'], msg: 'Field required (text or tool_calls)', input: v });
    total++;
  }
  if (!r.ok || errors.length) throw new ProtocolValidationError(errors, total);
  const toolCalls: SpadeAction['toolCalls'] = [];
  (r.value.tool_calls ?? []).forEach((c, i) => {
    const call = OPENAI_TOOL_CALL.test(c) ? c.function : (c as Static<typeof OPENAI_TOOL_CALL.schema>['function']);
    const at = [...prefix, 'tool_calls', i, 'arguments'];
    let args: unknown = call.arguments ?? {};
    if (typeof args === 'string') {
      try {
        args = JSON.parse(args) as unknown;
      } catch {
        errors.push({
          type: 'json_invalid',
          loc: at,
          msg: 'arguments should be an object or its JSON text',
          input: args,
        });
        return;
      }
    }
    if (nestedPast(args, MAX_ARGUMENT_DEPTH)) {
      errors.push({
        type: 'value_error',
        loc: at,
        msg: `arguments nest deeper than ${MAX_ARGUMENT_DEPTH} levels`,
        input: args,
      });
      return;
    }
    toolCalls.push({ name: call.name, arguments: args });
  });
  if (errors.length) throw new ProtocolValidationError(errors);
  return { text: r.value.text ?? '', toolCalls };
}

/** The text step() receives: the agent's text, then each tool call as `<tool_call>{...}</tool_call>`. */
export function actionText(action: SpadeAction): string {
  const calls = action.toolCalls.map(
    (c) => `<tool_call>${JSON.stringify({ name: c.name, arguments: c.arguments })}</tool_call>`,
  );
  return [action.text, ...calls].filter((s) => s !== '').join('\n');
}

/** What the observation says about the environment being played. */
export interface EpisodeInfo {
  envId: string;
  title: string;
  setting: string;
  skill: string;
  difficulty: string;
  seed: number;
}

/** The payload of a reset: OpenEnv's {observation, reward, done}; the hint only when it was asked for. */
export function resetPayload(
  ep: EpisodeInfo,
  text: string,
  info: Info,
  tools: ToolSchema[],
  hint: string | null,
): Record<string, unknown> {
  return {
    observation: {
      text,
      terminated: false,
      truncated: false,
      info,
      env_id: ep.envId,
      title: ep.title,
      setting: ep.setting,
      skill: ep.skill,
      difficulty: ep.difficulty,
      seed: ep.seed,
      step: 0,
      tools,
      hint,
    },
    reward: null,
    done: false,
  };
}

/** The payload of a step; done is terminated or truncated. */
export function stepPayload(ep: EpisodeInfo, step: number, r: StepResult): Record<string, unknown> {
  const [text, reward, terminated, truncated, info] = r;
  return {
    observation: {
      text,
      terminated,
      truncated,
      info,
      env_id: ep.envId,
      title: ep.title,
      setting: ep.setting,
      skill: ep.skill,
      difficulty: ep.difficulty,
      seed: ep.seed,
      step,
      tools: [],
      hint: null,
    },
    reward,
    done: terminated || truncated,
  };
}

/**
 * GET /schema: the JSON Schemas of the action (the very schema parseAction checks with), the
 * observation and the state, with pydantic's titles. TypeBox's own keys are symbols, which JSON
 * leaves out.
 */
export const SCHEMAS = {
  action: ACTION.schema,
  observation: Type.Object(
    {
      done: Type.Optional(Type.Boolean({ title: 'Done', default: false })),
      reward: Type.Optional(Type.Union([Type.Number(), Type.Null()], { title: 'Reward', default: null })),
      metadata: Type.Optional(anyObject({ title: 'Metadata' })),
      text: Type.String({ title: 'Text', description: 'What the agent sees' }),
      terminated: Type.Boolean({ title: 'Terminated' }),
      truncated: Type.Boolean({ title: 'Truncated' }),
      info: Type.Optional(anyObject({ title: 'Info' })),
      env_id: Type.Optional(Type.String({ title: 'Env Id' })),
      title: Type.Optional(Type.String({ title: 'Title' })),
      setting: Type.Optional(Type.Union([Type.Literal('games'), Type.Literal('tool_use')], { title: 'Setting' })),
      skill: Type.Optional(Type.String({ title: 'Skill' })),
      difficulty: Type.Optional(Type.String({ title: 'Difficulty' })),
      seed: Type.Optional(Type.Integer({ title: 'Seed' })),
      step: Type.Optional(Type.Integer({ title: 'Step' })),
      tools: Type.Optional(
        Type.Array(anyObject(), {
          title: 'Tools',
          description: 'OpenAI function schemas of a tool-use environment (reset only)',
        }),
      ),
      hint: Type.Optional(
        Type.Union([Type.String(), Type.Null()], {
          title: 'Hint',
          description: 'The privileged hint, only when the reset asked for it (hint: true)',
        }),
      ),
    },
    { title: 'SpadeObservation', additionalProperties: false },
  ),
  state: Type.Object(
    {
      episode_id: Type.Optional(Type.Union([Type.String(), Type.Null()], { title: 'Episode Id', default: null })),
      step_count: Type.Optional(Type.Integer({ minimum: 0, title: 'Step Count', default: 0 })),
      env_id: Type.Optional(Type.Union([Type.String(), Type.Null()], { title: 'Env Id' })),
      seed: Type.Optional(Type.Union([Type.Integer(), Type.Null()], { title: 'Seed' })),
      done: Type.Optional(Type.Boolean({ title: 'Done' })),
    },
    { title: 'SpadeState', additionalProperties: true },
  ),
};
