/**
 * The environment contract (JavaScript, Gymnasium-shaped; docs/environments.md):
 *   class SomethingEnv { constructor(maxTurns); reset(seed) → [observation, info];
 *     step(action) → [observation, reward, terminated, truncated, info]; solution() → actions; close() }
 * Games take `\boxed{command}` actions; tool-use environments extend the sandbox's ToolUseEnv.
 */

export const GAME_SKILLS = [
  'mathematical',
  'logical_deduction',
  'spatial',
  'pattern_recognition',
  'optimisation',
  'causal_reasoning',
] as const;
export const TOOL_SKILLS = [
  'api_orchestration',
  'data_retrieval',
  'state_modification',
  'error_recovery',
  'tool_selection',
  'multi_step_workflows',
] as const;

export type Info = Record<string, unknown>;
export type ResetResult = [observation: string, info: Info];
export type StepResult = [observation: string, reward: number, terminated: boolean, truncated: boolean, info: Info];

/** OpenAI function-calling schema, as exposed by ToolUseEnv. */
export interface ToolSchema {
  type: 'function';
  function: { name: string; description: string; parameters: Record<string, unknown> };
}

export interface LoadedEnv {
  id: string;
  className: string;
  setting: 'games' | 'tool_use';
  tools: ToolSchema[];
}

/** The content of the last `\boxed{...}` in `text` (nested braces allowed), or null. Same as the sandbox's. */
export function extractBoxed(text: string): string | null {
  const key = '\\boxed{';
  const start = text.lastIndexOf(key);
  if (start < 0) return null;
  let depth = 1;
  for (let i = start + key.length; i < text.length; i++) {
    const ch = text[i];
    if (ch === '{') depth++;
    else if (ch === '}' && --depth === 0) return text.slice(start + key.length, i).trim();
  }
  return null;
}

/** Metadata header of an environment file: `// @title ...`, `// @skill ...` lines at the top. */
export interface EnvHeader {
  title?: string;
  setting?: string;
  skill?: string;
  difficulty?: string;
  hint?: string;
  source?: string;
}

export function parseEnvHeader(code: string): EnvHeader {
  // a Map, then own keys: `// @constructor` or `// @__proto__` is a key like any other, never Object.prototype's
  const header = new Map<string, string>();
  for (const line of code.split('\n')) {
    const t = line.trim();
    if (t === '') continue;
    const m = /^\/\/\s*@(\w+)\s+(.*)$/.exec(t);
    if (m) {
      const key = m[1]!;
      const before = header.get(key);
      header.set(key, before ? `${before} ${m[2]!.trim()}` : m[2]!.trim());
    } else if (!t.startsWith('//')) break;
  }
  return Object.fromEntries(header) as EnvHeader;
}

/** The title a person sees: the `// @title` header, else the environment class name. */
export function envTitle(code: string): string {
  return parseEnvHeader(code).title ?? /class\s+(\w+Env)\b/.exec(code)?.[1] ?? 'Untitled environment';
}

/**
 * A game action as the player typed it, in the `\boxed{...}` form games read: text that already
 * holds a complete `\boxed{...}` is kept as it is; anything else is trimmed and wrapped.
 */
export function boxedAction(text: string): string {
  return extractBoxed(text) === null ? `\\boxed{${text.trim()}}` : text;
}
