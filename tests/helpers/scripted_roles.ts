/**
 * Test doubles for the loop: a designer that answers with known environments, a
 * hint writer, and an agent that plays well only when it sees the hint. Wrapped in
 * RecordingChatModel they produce replay transcripts; never offered as models.
 */
import type { ChatMessage } from '../../src/core/llm/chat_model.ts';
import { ScriptedChatModel } from '../../src/core/llm/replay.ts';
import { FAKE_ENV } from '../../src/core/env/hostile.ts';

/** Like FAKE_ENV, but step() hangs on the command "hang" (the checker's probes never send it). */
export const HANGING_ENV = FAKE_ENV.replace('class FakeHuntEnv', 'class HangHuntEnv')
  .replace('// @title Fake Hunt', '// @title Hang Hunt')
  .replace('Find my number', 'Find my hanging number')
  .replace('const b = extractBoxed(action);', "const b = extractBoxed(action);\n    if (b === 'hang') { for (;;) {} }");

/** designer: first attempt for "spatial" is broken (repair turn fixes it); "causal_reasoning" gets the hanging env. */
export function scriptedDesigner(): ScriptedChatModel {
  return new ScriptedChatModel('designer-double', (messages: ChatMessage[]) => {
    const ask = messages[1]!.content;
    const repairing = messages.length > 2;
    if (ask.includes('"spatial"') && !repairing)
      return 'Here you go:\n```javascript\nclass BrokenEnv { reset() { return "oops"; } }\n```';
    const code = ask.includes('"causal reasoning"') ? HANGING_ENV : FAKE_ENV;
    const skill = /trains the skill "([^"]+)"/.exec(ask)?.[1] ?? '?';
    return `\`\`\`javascript\n${code}\n// designed for the ${skill} task\n\`\`\``;
  });
}

export function scriptedHinter(): ScriptedChatModel {
  return new ScriptedChatModel('hint-double', () => 'Halve the remaining range with every guess.');
}

/** Plays binary search when the first observation has a HINT, otherwise guesses 20 every time. */
export function scriptedAgent(): ScriptedChatModel {
  return new ScriptedChatModel('agent-double', (messages: ChatMessage[]) => {
    const first = messages[1]!.content;
    if (first.includes('hanging')) return '\\boxed{hang}';
    if (!first.includes('HINT:')) return 'I will guess \\boxed{20}';
    let lo = 1,
      hi = 20;
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
  });
}
