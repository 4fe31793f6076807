/**
 * Every prompt the loop sends, written for this project: the designer (games and
 * tool use), the repair turn, the optional LLM validator, the hint writer and the
 * agent. Kept short: small models have small contexts.
 */
import type { ChatMessage } from '../llm/chat_model.ts';
import type { Difficulty, Setting } from '../config.ts';
import type { MemoryRecord } from './memory.ts';
import { ownField } from '../schema.ts';

const SKILL_BRIEFS: Record<string, string> = {
  mathematical: 'arithmetic, number theory or algebra the player must work out step by step',
  logical_deduction: 'hidden facts the player narrows down from clues or probe feedback',
  spatial: 'positions, grids, directions or shapes the player must track while moving or probing',
  pattern_recognition: 'a hidden rule or sequence the player uncovers by asking for examples',
  optimisation: 'choosing the best option under a budget, with feedback on each try',
  causal_reasoning: 'hidden cause-and-effect links the player discovers by intervening',
  api_orchestration: 'several tools whose outputs feed each other in the right order',
  data_retrieval: 'looking up, paging or filtering records to find a specific fact',
  state_modification: "changing the environment's state with tools so that a goal holds",
  error_recovery: 'tools that fail in realistic ways (rate limits, bad input) and must be retried or worked around',
  tool_selection: 'many tools, few of them useful: choosing the right one matters',
  multi_step_workflows: 'several instructions delivered one at a time, each building on the last',
};

const GAME_CONTRACT = `Write ONE JavaScript program (a script: no import/export) defining a class whose name ends in "Env":
  constructor(maxTurns = 12)      store maxTurns
  reset(seed)                      build hidden state; return [observation, {}]
  step(action)                     return [observation, reward, terminated, truncated, {}] on EVERY path
  solution()                       return the list of actions that wins from the current state
Rules:
- The player answers each turn with one command inside \\boxed{...}. Read it with extractBoxed(action) (provided; returns null when missing).
- Success: reward 1 and terminated = true. Progress may give a reward between 0 and 1.
- Set truncated = true when the turn count reaches maxTurns.
- Unknown, empty or malformed commands must not throw: return a helpful observation with reward 0.
- Genuinely multi-turn: hidden state the player uncovers by acting (3+ steps at medium difficulty).
- Use only Math.random for randomness (it is seeded for you). No Date, no I/O, no timers.
- The first observation explains the goal and the exact command syntax.
- Start the file with comment lines: // @title <short title>, // @skill <skill>, // @difficulty <level>.`;

const TOOL_CONTRACT = `Write ONE JavaScript program (a script: no import/export) defining a class whose name ends in "Env" that extends ToolUseEnv (provided):
  static tools = [{ name, description, parameters: <JSON schema> }, ...]
  one method per tool, same name, taking the arguments object; return a string or plain data; throw new Error("...") to report a tool error
  reset(seed)   build hidden state, then: return this.start(introText, [instruction1, instruction2, ...])
  checkAnswer(answer, stage)   true when <answer> text is right for instruction number stage (0-based)
  solution()    the list of actions that wins: '<tool_call>{"name": "...", "arguments": {...}}</tool_call>' strings and '<answer>...</answer>'
Rules:
- ToolUseEnv parses <tool_call> and <answer>, charges -0.1 for format errors, gives 1.0 when the last instruction is answered, ends on a wrong answer, and reveals the solution on truncation.
- The answer must require calling tools; nothing needed may be visible in the first observation.
- Use only Math.random for randomness (it is seeded for you). No Date, no I/O, no timers.
- Start the file with comment lines: // @title <short title>, // @skill <skill>, // @difficulty <level>.`;

const DIFFICULTY: Record<Difficulty, string> = {
  easy: 'easy: 2-3 steps, forgiving feedback',
  medium: 'medium: 3-6 steps, hidden state revealed gradually',
  hard: 'hard: 5+ steps, feedback that must be combined carefully',
};

/**
 * The contract's short form, the last thing dropped to fit a small window: the method
 * signatures and the rules a checker enforces, without the explanations.
 */
const GAME_CONTRACT_SHORT = `Write ONE JavaScript program: a class whose name ends in "Env" with constructor(maxTurns = 12), reset(seed) → [observation, {}], step(action) → [observation, reward, terminated, truncated, {}] on every path, solution() → list of winning actions. Read the command with extractBoxed(action). Win: reward 1, terminated true. Never throw on bad input. Use Math.random only.`;
const TOOL_CONTRACT_SHORT = `Write ONE JavaScript program: a class whose name ends in "Env" extending ToolUseEnv, with static tools = [{name, description, parameters}], one method per tool, reset(seed) ending in return this.start(intro, [instructions]), checkAnswer(answer, stage), solution() → list of <tool_call>/<answer> strings. Use Math.random only.`;

function example(r: MemoryRecord): string {
  const stats =
    r.winRate === null ? 'not played yet' : `win rate ${r.winRate.toFixed(2)}, regret ${(r.regret ?? 0).toFixed(2)}`;
  return `// ${r.title} (${stats})\n${r.code}`;
}

/** The negative example as one line, as the reference shows it: "too easy (win_rate=0.95): class X". */
function negativeLine(r: MemoryRecord): string {
  const w = r.winRate ?? 0;
  const cls = /class\s+(\w+Env)\b/.exec(r.code)?.[1];
  return `${w > 0.5 ? 'too easy' : 'too hard'} (win_rate=${w.toFixed(2)}): ${r.title}${cls && cls !== r.title ? ` (class ${cls})` : ''}`;
}

export interface DesignerBrief {
  setting: Setting;
  skill: string;
  difficulty: Difficulty;
  excerpt: string | null;
  source: string | null;
  positive: MemoryRecord[];
  negative: MemoryRecord | null;
  /** Use the contract's short form (the last step of fitting a small context window). */
  shortContract?: boolean;
}

export function designerMessages(b: DesignerBrief): ChatMessage[] {
  const parts = [
    `Design a ${b.setting === 'games' ? 'text game' : 'tool-use task'} that trains the skill "${b.skill.replace(/_/g, ' ')}" (${ownField(SKILL_BRIEFS, b.skill) ?? b.skill}). Difficulty ${DIFFICULTY[b.difficulty]}.`,
  ];
  if (b.excerpt) {
    parts.push(
      `Ground it in this document: the task must need a concept, fact or technique from it, but must not mention the document.\n<document source="${b.source ?? ''}">\n${b.excerpt}\n</document>`,
    );
  }
  if (b.positive.length) {
    parts.push(
      `${b.positive.length > 1 ? 'Examples' : 'An example'} of earlier environments — create a DIFFERENT one:\n\`\`\`javascript\n${b.positive.map(example).join('\n\n')}\n\`\`\``,
    );
  }
  if (b.negative) parts.push(`Avoid generating environments like: ${negativeLine(b.negative)}`);
  parts.push('Reply with the complete program in one ```javascript block and nothing else.');
  return [
    {
      role: 'system',
      content: `You design training environments for a reasoning agent.\n\n${
        b.setting === 'games'
          ? b.shortContract
            ? GAME_CONTRACT_SHORT
            : GAME_CONTRACT
          : b.shortContract
            ? TOOL_CONTRACT_SHORT
            : TOOL_CONTRACT
      }`,
    },
    { role: 'user', content: parts.join('\n\n') },
  ];
}

/** The repair turn: the previous conversation plus the checker's messages. */
export function repairMessages(previous: ChatMessage[], reply: string, failures: string[]): ChatMessage[] {
  return [
    ...previous,
    { role: 'assistant', content: reply },
    {
      role: 'user',
      content: `The environment failed these checks:\n${failures.map((f) => `- ${f}`).join('\n')}\n\nFix every problem and reply with the complete corrected program in one \`\`\`javascript block.`,
    },
  ];
}

export function validatorMessages(setting: Setting, code: string): ChatMessage[] {
  const ask =
    setting === 'tool_use'
      ? 'For each success criterion in checkAnswer, name the tool call that makes it reachable. Reject the task if a criterion cannot be reached with the tools, or if it already holds at reset.'
      : 'Judge leniently: reject only if the game cannot be won, is won without playing, or the observation does not explain the commands.';
  return [
    { role: 'system', content: 'You review generated training environments. Be brief.' },
    {
      role: 'user',
      content: `${ask}\n\n\`\`\`javascript\n${code}\n\`\`\`\n\nEnd your reply with exactly one line: VERDICT: ACCEPT or VERDICT: REJECT <reason>.`,
    },
  ];
}

export function hintMessages(setting: Setting, code: string): ChatMessage[] {
  return [
    {
      role: 'system',
      content:
        'You write short strategy hints for players of text environments. A hint explains HOW to approach the task. It never gives the answer, never states any concrete hidden value (numbers, words, positions, ids the code generates), and never lists the solution steps.',
    },
    {
      role: 'user',
      content: `Here is the environment's source code:\n\`\`\`javascript\n${code}\n\`\`\`\n\nWrite a hint of at most two sentences${setting === 'tool_use' ? ' about which tools to use and in what order, with no argument values' : ''}. Reply with the hint only.`,
    },
  ];
}

export function agentSystemPrompt(setting: Setting): string {
  return setting === 'games'
    ? 'You are playing a text game over several turns. Each turn, think briefly, then give exactly one command wrapped as \\boxed{command}. Use the feedback you receive.'
    : 'You solve tasks with tools over several turns. Each turn, think briefly, then reply with exactly one <tool_call>{"name": "...", "arguments": {...}}</tool_call>, or with your final <answer>...</answer>.';
}

export const HINT_PREFIX = '\n\nHINT: ';
