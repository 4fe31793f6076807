/**
 * The context budget of one model call: prompt tokens + max_tokens must fit the model's
 * window. Prompt tokens come from the model's own tokenizer when the backend has one
 * (`ChatModel.countTokens`: the local engine), otherwise from a conservative estimate.
 *
 * The estimate: ceil(UTF-8 bytes / 3) per message content, plus 8 tokens per message for
 * the chat template's role markers, plus 8 for the generation prompt. BPE vocabularies of
 * the small models we target (Qwen2.5/Qwen3, Llama 3, SmolLM2) spend 3.5–4.5 bytes per token
 * on English and JavaScript, so dividing by 3 over-counts by 15–50 %: a call planned with it
 * fits the real window (tests/unit/budget.test.ts checks every call of a recorded run against
 * the real Qwen3 tokenizer and chat template).
 */
import type { ChatMessage, ChatModel } from './chat_model.ts';

const utf8 = new TextEncoder();
const TEMPLATE_TOKENS_PER_MESSAGE = 8;
const GENERATION_PROMPT_TOKENS = 8;

/** Conservative token estimate of a text (see the file header). */
export function estimateTokens(text: string): number {
  // ASCII-only text needs no encoding pass: one byte per character
  let ascii = true;
  for (let i = 0; i < text.length; i++)
    if (text.charCodeAt(i) > 0x7f) {
      ascii = false;
      break;
    }
  return Math.ceil((ascii ? text.length : utf8.encode(text).length) / 3);
}

export function estimateMessages(messages: ChatMessage[]): number {
  let n = GENERATION_PROMPT_TOKENS;
  for (const m of messages) n += estimateTokens(m.content) + TEMPLATE_TOKENS_PER_MESSAGE;
  return n;
}

/** What the loop decided for one call; stored with the environment and summed in the metrics. */
export interface CallBudget {
  role: 'designer' | 'repair' | 'validator' | 'hint';
  promptTokens: number;
  /** True when the count came from the model's tokenizer, false for the estimate. */
  exact: boolean;
  window: number;
  /** max_tokens sent (after clamping). */
  maxTokens: number;
  /** max_tokens was lowered to fit the window. */
  clamped: boolean;
  /** Parts of the prompt dropped to fit, in the order they were dropped. */
  shrunk: string[];
  /** The call was not sent: even the smallest prompt left less than the minimum reply. */
  skipped: boolean;
}

export interface CallPlan {
  promptTokens: number;
  exact: boolean;
  window: number;
  maxTokens: number;
  clamped: boolean;
  /** At least `minReply` tokens are left for the reply. */
  fits: boolean;
}

/**
 * Tokens kept free beyond the prompt and the reply: the estimate of a template's exact
 * framing can be off by a few tokens, and servers count a BOS or a stop token.
 */
export const SAFETY_TOKENS = 16;

/** Count the prompt and clamp max_tokens so that prompt + reply ≤ window. */
export async function planCall(
  model: Pick<ChatModel, 'capabilities' | 'countTokens'>,
  messages: ChatMessage[],
  wanted: number,
  minReply: number,
): Promise<CallPlan> {
  const window = model.capabilities.contextWindow;
  let promptTokens: number;
  let exact = false;
  if (model.countTokens) {
    promptTokens = await model.countTokens(messages);
    exact = true;
  } else promptTokens = estimateMessages(messages);
  const room = window - promptTokens - (exact ? 0 : SAFETY_TOKENS);
  const maxTokens = Math.max(0, Math.min(wanted, room));
  return { promptTokens, exact, window, maxTokens, clamped: maxTokens < wanted, fits: maxTokens >= minReply };
}

/** A CallBudget record from a plan. */
export function callBudget(role: CallBudget['role'], plan: CallPlan, shrunk: string[] = []): CallBudget {
  return {
    role,
    promptTokens: plan.promptTokens,
    exact: plan.exact,
    window: plan.window,
    maxTokens: plan.maxTokens,
    clamped: plan.clamped,
    shrunk,
    skipped: !plan.fits,
  };
}

/**
 * The agent's conversation cut to fit: the system prompt and the first observation (which
 * carries the goal and the hint) always stay; then as many of the latest turns as fit,
 * oldest dropped first, with one line saying how many were left out. Returns the messages
 * and how many turn pairs were dropped.
 */
export async function fitConversation(
  model: Pick<ChatModel, 'capabilities' | 'countTokens'>,
  messages: ChatMessage[],
  wanted: number,
  minReply: number,
): Promise<{ messages: ChatMessage[]; plan: CallPlan; dropped: number }> {
  const full = await planCall(model, messages, wanted, minReply);
  if (full.fits || messages.length <= 2) return { messages, plan: full, dropped: 0 };
  let plan: CallPlan;
  const head = messages.slice(0, 2);
  const rest = messages.slice(2); // (assistant, user) pairs
  const pairs = Math.floor(rest.length / 2);
  // the latest turn (the observation being answered) always stays
  for (let dropped = 1; dropped < pairs; dropped++) {
    const kept = rest.slice(dropped * 2);
    const note: ChatMessage = {
      role: 'user',
      content: `[${dropped} earlier turn${dropped > 1 ? 's' : ''} left out to fit the context window]`,
    };
    // the note joins the first observation so that user/assistant turns still alternate
    const first: ChatMessage = { ...head[1]!, content: `${head[1]!.content}\n\n${note.content}` };
    const candidate = [head[0]!, first, ...kept];
    plan = await planCall(model, candidate, wanted, minReply);
    if (plan.fits) return { messages: candidate, plan, dropped };
  }
  return { messages, plan: full, dropped: 0 }; // nothing fits: the caller ends the episode
}
