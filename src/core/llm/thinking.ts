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

/**
 * The reply without its thinking: every `<think>...</think>` block is removed; an unclosed `<think>`
 * (the reply was cut off while thinking) removes everything after it; a `</think>` with no opening
 * tag (templates that open the block in the prompt, e.g. DeepSeek-R1 distills) removes everything
 * before it. Leading whitespace left behind is trimmed; text without think tags is returned as is.
 */
export function stripThinking(text: string): string {
  if (!text.includes('<think>') && !text.includes('</think>')) return text;
  let t = text;
  const firstClose = t.indexOf('</think>');
  const firstOpen = t.indexOf('<think>');
  if (firstClose >= 0 && (firstOpen < 0 || firstClose < firstOpen)) t = t.slice(firstClose + '</think>'.length);
  t = t.replace(/<think>[\s\S]*?<\/think>/g, '');
  const open = t.indexOf('<think>');
  if (open >= 0) t = t.slice(0, open);
  return t.replace(/^\s+/, '');
}
