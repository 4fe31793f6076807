/**
 * Scripted models: ChatModels that answer from a script (a designer that writes a known game, a
 * hint writer, an agent that plays it), with no model behind them. They drive the loop where what
 * matters is the machinery around the model: its tests, and `spade bench loop` (the loop's own
 * overhead). They are never offered in the UI or as a --backend, and never presented as a model.
 */
import { FAKE_ENV } from '../env/hostile.ts';
import type { ChatMessage, ChatModel, ChatOptions, ChatResult, ModelCapabilities } from './chat_model.ts';
import { throwIfAborted } from './chat_model.ts';

/** Answers with `respond(messages, options)`. */
export class ScriptedChatModel implements ChatModel {
  readonly backend = 'scripted';
  readonly capabilities: ModelCapabilities = {
    streaming: true,
    logprobs: false,
    trainable: false,
    contextWindow: 8192,
  };
  constructor(
    readonly model: string,
    private readonly respond: (messages: ChatMessage[], options: ChatOptions) => string,
  ) {}
  async chat(messages: ChatMessage[], options: ChatOptions = {}): Promise<ChatResult> {
    throwIfAborted(options.signal);
    const text = this.respond(messages, options);
    options.onToken?.(text);
    return {
      text,
      finishReason: 'stop',
      usage: { promptTokens: 0, completionTokens: text.split(/\s+/).length },
      ms: 0,
    };
  }
}

/** Like FAKE_ENV, but step() hangs on the command "hang" (the checker's probes never send it). */
const HANGING_ENV = FAKE_ENV.replace('class FakeHuntEnv', 'class HangHuntEnv')
  .replace('// @title Fake Hunt', '// @title Hang Hunt')
  .replace('Find my number', 'Find my hanging number')
  .replace('const b = extractBoxed(action);', "const b = extractBoxed(action);\n    if (b === 'hang') { for (;;) {} }");

/**
 * Designer double: answers every request with FAKE_ENV (tagged with the skill), except that the
 * first attempt for "spatial" is broken (so a repair turn fixes it) and "causal reasoning" gets
 * HANGING_ENV.
 */
export function scriptedDesigner(): ScriptedChatModel {
  return new ScriptedChatModel('designer-double', designerReply);
}

function designerReply(messages: ChatMessage[]): string {
  const ask = messages[1]!.content;
  const repairing = messages.length > 2;
  if (ask.includes('"spatial"') && !repairing)
    return 'Here you go:\n```javascript\nclass BrokenEnv { reset() { return "oops"; } }\n```';
  const code = ask.includes('"causal reasoning"') ? HANGING_ENV : FAKE_ENV;
  const skill = /trains the skill "([^"]+)"/.exec(ask)?.[1] ?? '?';
  return `\`\`\`javascript\n${code}\n// designed for the ${skill} task\n\`\`\``;
}

const hintReply = (): string => 'Halve the remaining range with every guess.';

export function scriptedHinter(): ScriptedChatModel {
  return new ScriptedChatModel('hint-double', hintReply);
}

/** Agent double: binary search when the first observation has a HINT; otherwise guesses 20 every time. */
export function scriptedAgent(): ScriptedChatModel {
  return new ScriptedChatModel('agent-double', agentReply);
}

function agentReply(messages: ChatMessage[]): string {
  const first = messages[1]!.content;
  if (first.includes('hanging')) return '\\boxed{hang}';
  if (!first.includes('HINT:')) return 'I will guess \\boxed{20}';
  let lo = 1;
  let hi = 20;
  const guesses = messages
    .filter((m) => m.role === 'assistant')
    .map((m) => Number(/\\boxed\{(\d+)\}/.exec(m.content)?.[1]));
  const feedback = messages
    .filter((m) => m.role === 'user')
    .slice(1)
    .map((m) => m.content);
  guesses.forEach((g, i) => {
    if (feedback[i]?.startsWith('Higher')) lo = g + 1;
    else if (feedback[i]?.startsWith('Lower')) hi = g - 1;
  });
  return `\\boxed{${(lo + hi) >> 1}}`;
}

/** One double for all three roles, dispatching on the system prompt (like one model serving every role). */
export function scriptedTrio(): ScriptedChatModel {
  return new ScriptedChatModel('trio-double', (messages) => {
    if (messages.length < 2) return `echo: ${messages[0]?.content ?? ''}`;
    const sys = messages[0]!.content;
    if (sys.startsWith('You design')) return designerReply(messages);
    if (sys.startsWith('You write short strategy hints')) return hintReply();
    if (sys.startsWith('You review generated training environments'))
      return 'The goal cannot be reached.\nVERDICT: REJECT no reachable goal';
    return agentReply(messages);
  });
}
