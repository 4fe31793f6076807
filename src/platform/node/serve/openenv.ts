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

/** Thrown by the validators below; `errors` is the pydantic-shaped list sent to the client. */
export class ProtocolValidationError extends Error {
  constructor(readonly errors: FieldError[]) {
    super(errors.map((e) => `${e.loc.join('.')}: ${e.msg}`).join('; '));
    this.name = 'ProtocolValidationError';
  }
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
  const seed = data.seed ?? null;
  if (seed !== null && !(typeof seed === 'number' && Number.isInteger(seed) && seed >= 0 && seed <= 2 ** 32 - 1))
    errors.push(
      fieldError('int_type', [...prefix, 'seed'], 'Input should be a whole number from 0 to 4294967295', seed),
    );
  const episodeId = data.episode_id ?? null;
  if (episodeId !== null && !(typeof episodeId === 'string' && episodeId.length <= 255))
    errors.push(
      fieldError(
        'string_type',
        [...prefix, 'episode_id'],
        'Input should be a string of at most 255 characters',
        episodeId,
      ),
    );
  const envId = data.env_id ?? null;
  if (envId !== null && !(typeof envId === 'string' && envId.length <= 255))
    errors.push(
      fieldError('string_type', [...prefix, 'env_id'], 'Input should be an environment id from GET /metadata', envId),
    );
  const sample = data.sample ?? null;
  if (sample !== null && !(SAMPLE_RULES as readonly unknown[]).includes(sample))
    errors.push({
      type: 'enum',
      loc: [...prefix, 'sample'],
      msg: `Input should be ${SAMPLE_RULES.map((r) => `'${r}'`).join(', ')}`,
      input: sample,
    });
  if (envId !== null && sample !== null)
    errors.push(fieldError('value_error', [...prefix, 'sample'], 'Give env_id or sample, not both', sample));
  const hint = data.hint ?? false;
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
