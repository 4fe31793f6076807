/**
 * Thinking (the `<think>...</think>` block of Qwen3 and other reasoning models): the config switch
 * every backend honours, and the reply clean-up every backend applies before the loop reads a reply.
 *
 * With `thinking: 'off'` (the default, config.ts) each backend asks the model not to think in the
 * model's documented way: the local engine renders the chat template with `enable_thinking: false`,
 * the openai backend sends `chat_template_kwargs: {enable_thinking: false}` (vLLM, SGLang, llama.cpp
 * server), WebLLM sends `extra_body: {enable_thinking: false}` for Qwen3 records. Either way the
 * reply the loop reads has its think blocks removed (stripThinking), so a model that thinks anyway
 * cannot smuggle a draft program or a `\boxed{}` action out of its scratch pad.
 */

export type Thinking = 'off' | 'on';

/** Qwen3 models (Qwen3-0.6B-q4f16_1-MLC, Qwen/Qwen3-1.7B, qwen3:4b): the ones with the enable_thinking switch. */
export function isQwen3(modelId: string): boolean {
  return /qwen-?3/i.test(modelId);
}

const OPEN = '<think>';
const CLOSE = '</think>';

/**
 * The reply without its thinking: every `<think>...</think>` block is removed; an unclosed `<think>`
 * (the reply was cut off while thinking) removes everything after it; a `</think>` with no opening
 * tag (templates that open the block in the prompt, e.g. DeepSeek-R1 distills) removes everything
 * before it. Leading whitespace left behind is trimmed; text without think tags is returned as is.
 * One forward scan with indexOf: linear in the reply, however its tags are arranged (a reply of
 * thousands of unclosed `<think>` tags included).
 */
export function stripThinking(text: string): string {
  if (!text.includes(OPEN) && !text.includes(CLOSE)) return text;
  let t = text;
  const firstClose = t.indexOf(CLOSE);
  const firstOpen = t.indexOf(OPEN);
  if (firstClose >= 0 && (firstOpen < 0 || firstClose < firstOpen)) t = t.slice(firstClose + CLOSE.length);
  // Each block runs from a <think> to the first </think> after it. Once a <think> has no </think>
  // after it, no later one has either: the rest stays, and is cut below.
  const kept: string[] = [];
  let from = 0;
  for (;;) {
    const open = t.indexOf(OPEN, from);
    const close = open < 0 ? -1 : t.indexOf(CLOSE, open + OPEN.length);
    if (close < 0) break;
    kept.push(t.slice(from, open));
    from = close + CLOSE.length;
  }
  kept.push(t.slice(from));
  t = kept.join('');
  // Removing blocks can join a "<thi" and a "nk>" around one: that tag counts as unclosed too.
  const open = t.indexOf(OPEN);
  if (open >= 0) t = t.slice(0, open);
  return t.trimStart();
}
