/**
 * Every default that is not a setting of the config (config.ts) or of the Lab (lab/settings.ts),
 * in one place, each as a Field (schema.ts) with the reason for its value: the served environments'
 * limits (`spade serve`), the local engine's decode scheduler and chat replies, a fresh LoRA adapter
 * and the Training panel's tiny fresh model. The CLI's help, the server, the engine and the app read
 * their defaults from here, so each value is written once and says why.
 */
import { CONFIG_SCHEMA } from './config.ts';
import { defaultsOf, field, int, list, num, oneOf, text } from './schema.ts';

/** `spade serve` (platform/node/serve/server.ts, cli/cmd_serve.ts). */
export const SERVE_FIELDS = {
  host: field(text(253), {
    default: '127.0.0.1',
    why: 'loopback: a trainer on the same machine reaches it and nothing else can; any other address needs a token',
  }),
  port: field(int(0, 65_535), {
    default: 8000,
    why: "OpenEnv's own servers listen on 8000, so a trainer's default client URL finds it (0: any free port)",
  }),
  idleTimeoutS: field(int(1, 86_400), {
    default: 300,
    why: 'a session that has sent nothing for 5 minutes is a trainer that went away: its instance is freed for others',
  }),
  maxTurns: field(int(1, 1000), {
    default: CONFIG_SCHEMA.maxTurns.default,
    why: "the loop's own maxTurns (config.ts): an episode served is as long as one the loop plays",
  }),
  maxMessageBytes: field(int(1024, 2 ** 26), {
    default: 2 ** 20,
    why: "1 MiB per WebSocket frame or HTTP body: 16 times the sandbox's 64 KiB action limit, and far below what a flood needs",
  }),
} as const;
export const SERVE_DEFAULTS = defaultsOf(SERVE_FIELDS);

/** The local engine's decode scheduler (engine/model/batch.ts SchedulerOptions). */
export const SCHEDULER_FIELDS = {
  maxBatch: field(int(1, 1024), {
    default: 16,
    why: "sequences decoded together in one step: a cycle's plays in flight at the laptop preset fit, and a run passes its own concurrency",
  }),
  prefillBudget: field(int(1, 2 ** 20), {
    default: 512,
    why: 'prompt tokens prefilled in one step: a long prompt is cut into steps, so the sequences already decoding do not stall',
  }),
  prefixCacheTokens: field(int(0, 2 ** 24), {
    default: 8192,
    why: "tokens of finished sequences kept for prefix reuse: a few episodes' conversations, whose next turn starts with them",
  }),
  stepsPerReadback: field(int(1, 64), {
    default: 1,
    why: 'a read-back every step: the simplest and every adapter gains from it; more steps per read-back is an opt-in for software adapters',
  }),
} as const;
export const SCHEDULER_DEFAULTS = defaultsOf(SCHEDULER_FIELDS);

/** A chat reply of the local engine when the call does not say (engine/model/local_model.ts). */
export const LOCAL_CHAT_FIELDS = {
  temperature: field(num(0, 2), {
    default: 0.6,
    why: 'paper: 0.6 for both roles (the loop passes its designerTemperature/agentTemperature; this is for a call that gives none)',
  }),
  maxTokens: field(int(1, 2 ** 20), {
    default: 256,
    why: "a chat reply's length when the call gives none: a turn of the agent, never a whole environment (the loop passes designerMaxTokens for those)",
  }),
} as const;
export const LOCAL_CHAT_DEFAULTS = defaultsOf(LOCAL_CHAT_FIELDS);

/** A fresh LoRA adapter's shape when none is given (core/train/closed_loop.ts, the Training panel, `spade run --train`). */
export const LORA_FIELDS = {
  r: field(int(1, 256), {
    default: 8,
    why: "PEFT's default rank: small enough to train in a tab, large enough to move a small model",
  }),
  alpha: field(num(0, 1024), {
    default: 16,
    why: 'twice the rank, the usual scale (the update is multiplied by alpha / r = 2)',
  }),
  targets: field(list(oneOf(['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'] as const)), {
    default: ['q_proj', 'v_proj'],
    why: "the attention's q and v, as PEFT's defaults for Llama-family models: the fewest modules that still learn",
  }),
} as const;
export const LORA_DEFAULTS = defaultsOf(LORA_FIELDS);

/** The Training panel's "Start from a tiny fresh model" (engine/engine.ts FreshModel). */
export const FRESH_MODEL_FIELDS = {
  arch: field(oneOf(['qwen2', 'qwen3', 'llama'] as const), {
    default: 'qwen2',
    why: 'Qwen2 has biases on q, k and v, as Qwen2.5 does: the fresh model exercises the path a real checkpoint takes',
  }),
  layers: field(int(1, 64), {
    default: 2,
    why: 'two layers (~0.1M parameters with hidden 64): a cycle of sampling and a training round take seconds on a laptop GPU, and a software one still finishes a cycle',
  }),
  hidden: field(int(16, 4096), { default: 64, why: 'four heads of 16: the smallest shape every kernel is tested at' }),
  seed: field(int(0, 2 ** 31 - 1), {
    default: 1,
    why: "seed 1, like the config's and the Lab's: the same fresh model every time unless changed",
  }),
} as const;
export const FRESH_MODEL_DEFAULTS = defaultsOf(FRESH_MODEL_FIELDS);
