/**
 * OpenEnv's wire protocol as `spade serve` speaks it (docs/scale-out.md names the OpenEnv commit it
 * follows): request validation with pydantic-shaped error lists, the WebSocket message types and
 * error codes, the observation payload ({observation, reward, done}), the SPADE action and
 * observation models and their JSON schemas (GET /schema). Pure: no sockets, no sandbox.
 */
import type { Info, StepResult, ToolSchema } from '../../../core/env/contract.ts';

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
/** A client's field: its own property only, never one Object.prototype carries. */
const own = (v: Record<string, unknown>, k: string): unknown => (Object.hasOwn(v, k) ? v[k] : undefined);

/** Deepest level of a client's value echoed back in an error's `input` (deeper levels are summarised). */
export const ECHO_DEPTH = 3;
/** Most items of a list (or keys of an object) echoed back; the rest are counted. */
export const ECHO_ITEMS = 8;
/** Longest string (or key) echoed back: enough to recognise the value, never the client's whole payload. */
export const ECHO_CHARS = 200;
/** Most entries of one validation error list (an object of 100 000 extra keys is one line, not 100 000). */
export const MAX_FIELD_ERRORS = 20;

const cut = (s: string): string => (s.length > ECHO_CHARS ? `${s.slice(0, ECHO_CHARS)}… (${s.length} characters)` : s);

/**
 * A client's value as an error echoes it: at most ECHO_DEPTH levels, ECHO_ITEMS items per level
 * and ECHO_CHARS per string, so what is sent back is small whatever was received (a 20 000-deep
 * list is `[[["[list of 1]"]]]`). Built on a null-prototype object, so a `__proto__` key is data.
 */
export function echo(v: unknown, depth = 0): unknown {
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
 * every echoed `input` and `loc` key bounded (echo) and at most MAX_FIELD_ERRORS entries.
 */
export class ProtocolValidationError extends Error {
  readonly errors: FieldError[];
  constructor(errors: FieldError[]) {
    const kept = errors.slice(0, MAX_FIELD_ERRORS).map((e) => ({
      ...e,
      loc: e.loc.map((k) => (typeof k === 'string' ? cut(k) : k)),
      input: echo(e.input),
    }));
    if (errors.length > MAX_FIELD_ERRORS)
      kept.push({
        type: 'too_many_errors',
        loc: [],
        msg: `${errors.length - MAX_FIELD_ERRORS} more error(s) left out`,
        input: null,
      });
    super(kept.map((e) => `${e.loc.join('.')}: ${e.msg}`).join('; '));
    this.name = 'ProtocolValidationError';
    this.errors = kept;
  }
}

/** The longest reply (JSON characters) sent: far above any observation the sandbox lets out (64 KiB). */
export const MAX_REPLY_CHARS = 16 * 2 ** 20;

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

function extraForbidden(obj: Record<string, unknown>, allowed: readonly string[], prefix: (string | number)[]) {
  return Object.keys(obj)
    .filter((k) => !allowed.includes(k))
    .map((k) => ({
      type: 'extra_forbidden',
      loc: [...prefix, k],
      msg: 'Extra inputs are not permitted',
      input: obj[k],
    }));
}

/** One entry of a validation error list, in pydantic's shape. */
function fieldError(type: string, loc: (string | number)[], msg: string, input: unknown): FieldError {
  return { type, loc, msg, input };
}

/**
 * Reset parameters from a ResetRequest body (HTTP) or a reset message's data (WebSocket):
 * seed a whole number ≥ 0, episode_id a string of at most 255 characters, env_id a string,
 * sample one of SAMPLE_RULES, hint a boolean. Other keys are allowed and ignored.
 */
export function parseResetParams(data: unknown, prefix: (string | number)[] = ['body']): ResetParams {
  if (data === undefined || data === null) data = {};
  if (!isObj(data))
    throw new ProtocolValidationError([
      { type: 'model_attributes_type', loc: prefix, msg: 'Input should be a valid dictionary', input: data },
    ]);
  const errors: FieldError[] = [];
  const seed = own(data, 'seed') ?? null;
  if (seed !== null && !(typeof seed === 'number' && Number.isInteger(seed) && seed >= 0 && seed <= 2 ** 32 - 1))
    errors.push(
      fieldError('int_type', [...prefix, 'seed'], 'Input should be a whole number from 0 to 4294967295', seed),
    );
  const episodeId = own(data, 'episode_id') ?? null;
  if (episodeId !== null && !(typeof episodeId === 'string' && episodeId.length <= 255))
    errors.push(
      fieldError(
        'string_type',
        [...prefix, 'episode_id'],
        'Input should be a string of at most 255 characters',
        episodeId,
      ),
    );
  const envId = own(data, 'env_id') ?? null;
  if (envId !== null && !(typeof envId === 'string' && envId.length <= 255))
    errors.push(
      fieldError('string_type', [...prefix, 'env_id'], 'Input should be an environment id from GET /metadata', envId),
    );
  const sample = own(data, 'sample') ?? null;
  if (sample !== null && !(SAMPLE_RULES as readonly unknown[]).includes(sample))
    errors.push({
      type: 'enum',
      loc: [...prefix, 'sample'],
      msg: `Input should be ${SAMPLE_RULES.map((r) => `'${r}'`).join(', ')}`,
      input: sample,
    });
  if (envId !== null && sample !== null)
    errors.push(fieldError('value_error', [...prefix, 'sample'], 'Give env_id or sample, not both', sample));
  const hint = own(data, 'hint') ?? false;
  if (typeof hint !== 'boolean')
    errors.push(fieldError('bool_type', [...prefix, 'hint'], 'Input should be a valid boolean', hint));
  if (errors.length) throw new ProtocolValidationError(errors);
  return {
    seed: seed as number | null,
    episodeId: episodeId as string | null,
    envId: envId as string | null,
    sample: sample as SampleRule | null,
    hint: hint as boolean,
  };
}

/**
 * Deepest nesting of a tool call's arguments: the sandbox refuses actions nested past MAX_NESTING
 * (100) anyway, and a value this deep is never a real call; refusing it here keeps re-encoding it
 * (actionText) off the stack's edge.
 */
export const MAX_ARGUMENT_DEPTH = 64;

/** True when `v` has lists or objects nested more than `max` deep (iterative: no recursion on hostile input). */
export function nestedPast(v: unknown, max: number): boolean {
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

/**
 * A SpadeAction from an action dict: {text?, tool_calls?, metadata?}, nothing else (OpenEnv's
 * Action model forbids extra fields); at least one of text and tool_calls. A tool call is
 * {name, arguments} or OpenAI's {type: "function", function: {name, arguments}}, arguments an
 * object or its JSON text.
 */
export function parseAction(data: unknown, prefix: (string | number)[] = []): SpadeAction {
  if (!isObj(data))
    throw new ProtocolValidationError([
      {
        type: 'model_type',
        loc: prefix,
        msg: 'Input should be a valid dictionary or instance of SpadeAction',
        input: data,
      },
    ]);
  const errors = extraForbidden(data, ['text', 'tool_calls', 'metadata'], prefix);
  if (data.text !== undefined && typeof data.text !== 'string')
    errors.push(fieldError('string_type', [...prefix, 'text'], 'Input should be a valid string', data.text));
  if (data.metadata !== undefined && !isObj(data.metadata))
    errors.push(fieldError('dict_type', [...prefix, 'metadata'], 'Input should be a valid dictionary', data.metadata));
  const toolCalls: SpadeAction['toolCalls'] = [];
  if (data.tool_calls !== undefined) {
    if (!Array.isArray(data.tool_calls))
      errors.push(fieldError('list_type', [...prefix, 'tool_calls'], 'Input should be a valid list', data.tool_calls));
    else
      data.tool_calls.forEach((c: unknown, i) => {
        const call = isObj(c) && isObj(c.function) ? c.function : c;
        if (!isObj(call) || typeof call.name !== 'string') {
          errors.push(
            fieldError(
              'value_error',
              [...prefix, 'tool_calls', i],
              'A tool call is {"name": string, "arguments": object}',
              c,
            ),
          );
          return;
        }
        let args: unknown = call.arguments ?? {};
        if (typeof args === 'string') {
          try {
            args = JSON.parse(args) as unknown;
          } catch {
            errors.push(
              fieldError(
                'json_invalid',
                [...prefix, 'tool_calls', i, 'arguments'],
                'arguments should be an object or its JSON text',
                call.arguments,
              ),
            );
            return;
          }
        }
        if (nestedPast(args, MAX_ARGUMENT_DEPTH)) {
          errors.push(
            fieldError(
              'value_error',
              [...prefix, 'tool_calls', i, 'arguments'],
              `arguments nest deeper than ${MAX_ARGUMENT_DEPTH} levels`,
              args,
            ),
          );
          return;
        }
        toolCalls.push({ name: call.name, arguments: args });
      });
  }
  if (data.text === undefined && data.tool_calls === undefined)
    errors.push(fieldError('missing', [...prefix, 'text'], 'Field required (text or tool_calls)', data));
  if (errors.length) throw new ProtocolValidationError(errors);
  return { text: (data.text as string | undefined) ?? '', toolCalls };
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

/** GET /schema: JSON schemas of the action, the observation and the state, as pydantic writes them. */
export const SCHEMAS = {
  action: {
    title: 'SpadeAction',
    type: 'object',
    description:
      "The agent's reply. Games read the last \\boxed{...} in text; tool-use environments read one <tool_call>{...}</tool_call> or a final <answer>...</answer>. tool_calls are appended to text in that form.",
    properties: {
      metadata: { type: 'object', title: 'Metadata', additionalProperties: true },
      text: { type: 'string', title: 'Text', default: '' },
      tool_calls: {
        type: 'array',
        title: 'Tool Calls',
        items: {
          type: 'object',
          properties: { name: { type: 'string' }, arguments: { anyOf: [{ type: 'object' }, { type: 'string' }] } },
          required: ['name'],
        },
      },
    },
    additionalProperties: false,
  },
  observation: {
    title: 'SpadeObservation',
    type: 'object',
    properties: {
      done: { type: 'boolean', title: 'Done', default: false },
      reward: { anyOf: [{ type: 'number' }, { type: 'null' }], title: 'Reward', default: null },
      metadata: { type: 'object', title: 'Metadata', additionalProperties: true },
      text: { type: 'string', title: 'Text', description: 'What the agent sees' },
      terminated: { type: 'boolean', title: 'Terminated' },
      truncated: { type: 'boolean', title: 'Truncated' },
      info: { type: 'object', title: 'Info', additionalProperties: true },
      env_id: { type: 'string', title: 'Env Id' },
      title: { type: 'string', title: 'Title' },
      setting: { type: 'string', enum: ['games', 'tool_use'], title: 'Setting' },
      skill: { type: 'string', title: 'Skill' },
      difficulty: { type: 'string', title: 'Difficulty' },
      seed: { type: 'integer', title: 'Seed' },
      step: { type: 'integer', title: 'Step' },
      tools: {
        type: 'array',
        title: 'Tools',
        description: 'OpenAI function schemas of a tool-use environment (reset only)',
        items: { type: 'object' },
      },
      hint: {
        anyOf: [{ type: 'string' }, { type: 'null' }],
        title: 'Hint',
        description: 'The privileged hint, only when the reset asked for it (hint: true)',
      },
    },
    required: ['text', 'terminated', 'truncated'],
    additionalProperties: false,
  },
  state: {
    title: 'SpadeState',
    type: 'object',
    properties: {
      episode_id: { anyOf: [{ type: 'string' }, { type: 'null' }], title: 'Episode Id', default: null },
      step_count: { type: 'integer', minimum: 0, title: 'Step Count', default: 0 },
      env_id: { anyOf: [{ type: 'string' }, { type: 'null' }], title: 'Env Id' },
      seed: { anyOf: [{ type: 'integer' }, { type: 'null' }], title: 'Seed' },
      done: { type: 'boolean', title: 'Done' },
    },
    additionalProperties: true,
  },
} as const;
