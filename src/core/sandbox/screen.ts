/**
 * The host's screening of text on its way into the sandbox, before QuickJS sees any of it:
 * environment code (not empty, within its size, brackets nested at most MAX_NESTING deep, a class
 * whose name ends in "Env") and actions (within maxActionChars, nested at most MAX_NESTING deep),
 * and observations on their way out (within maxObservationBytes). QuickJS's parser and JSON.parse
 * recurse on the host's native stack, which the guest's stack limit does not see, so nesting is
 * refused here, unread.
 *
 * Control characters: one rule, "kept". An action reaches the environment exactly as sent —
 * NUL, other C0 controls and lone surrogates included; nothing is stripped, escaped or refused
 * for its characters (the host passes it to the guest as JSON text, which carries every UTF-16
 * unit). The same holds for observations and info on their way back.
 */
import { ActionRejectedError, EnvContractError } from '../errors.ts';
import { DEFAULT_LIMITS, MAX_NESTING, type SandboxLimits } from '../env/limits.ts';

/**
 * Deepest bracket nesting in `text` — ( [ { and template `${` — skipping string literals and
 * comments when `js` is set; stops counting once past `limit`. Linear, no allocation per character.
 */
function nestingDepth(text: string, js: boolean, limit = Infinity): number {
  let depth = 0;
  let max = 0;
  // template literals nest: each entry is the depth at which a `${` opened inside a template
  const templates: number[] = [];
  const n = text.length;
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c === 40 || c === 91 || c === 123) {
      // ( [ {
      if (++depth > max && (max = depth) > limit) return max;
    } else if (c === 41 || c === 93 || c === 125) {
      // ) ] }
      if (js && c === 125 && templates.length && templates[templates.length - 1] === depth) {
        templates.pop();
        depth--;
        i = skipTemplate(text, i + 1, templates, depth);
        if (templates.length && templates[templates.length - 1] === depth + 1) {
          depth++;
          if (depth > max && (max = depth) > limit) return max;
        }
        continue;
      }
      if (depth > 0) depth--;
    } else if (js && (c === 39 || c === 34)) {
      // ' or ": to the closing quote or the end of the line
      for (i++; i < n; i++) {
        const d = text.charCodeAt(i);
        if (d === 92) i++;
        else if (d === c || d === 10) break;
      }
    } else if (js && c === 96) {
      // `: a template literal; `${` opens a nesting level
      i = skipTemplate(text, i + 1, templates, depth);
      if (templates.length && templates[templates.length - 1] === depth + 1) {
        depth++;
        if (depth > max && (max = depth) > limit) return max;
      }
    } else if (js && c === 47 && text.charCodeAt(i + 1) === 47) {
      const end = text.indexOf('\n', i);
      i = end < 0 ? n : end;
    } else if (js && c === 47 && text.charCodeAt(i + 1) === 42) {
      const end = text.indexOf('*/', i + 2);
      i = end < 0 ? n : end + 1;
    }
  }
  return max;
}

/** Skip template text from `i`; at `${` push the new depth and return its index; at the closing ` return it. */
function skipTemplate(text: string, i: number, templates: number[], depth: number): number {
  for (; i < text.length; i++) {
    const d = text.charCodeAt(i);
    if (d === 92) i++;
    else if (d === 96) return i;
    else if (d === 36 && text.charCodeAt(i + 1) === 123) {
      templates.push(depth + 1);
      return i + 1;
    }
  }
  return i;
}

const utf8 = new TextEncoder();
/** UTF-8 size when over `limit`, else 0; encodes only when it could be over (3 bytes per UTF-16 unit at most). */
function bytesOver(s: string, limit: number): number {
  if (s.length * 3 <= limit) return 0;
  const n = utf8.encode(s).length;
  return n > limit ? n : 0;
}

/** Candidate class names in source order; the last declared is tried first. */
export function envClassNames(code: string): string[] {
  const names: string[] = [];
  for (const m of code.matchAll(
    /\bclass\s+([A-Za-z_$][\w$]*Env)\b|\b(?:const|let|var)\s+([A-Za-z_$][\w$]*Env)\s*=\s*class\b/g,
  )) {
    const n = (m[1] ?? m[2])!;
    if (n !== 'ToolUseEnv' && !names.includes(n)) names.push(n);
  }
  return names.reverse();
}

/**
 * The host's checks on environment source before any of it reaches QuickJS: not empty, within
 * the size limit, brackets nested at most MAX_NESTING deep (deeper overflows the host stack in
 * QuickJS's parser), and a class whose name ends in "Env". Returns the candidate class names.
 */
export function checkSource(code: string, limits: SandboxLimits): string[] {
  if (typeof code !== 'string' || code.trim() === '') {
    throw new EnvContractError('The environment code is empty. Write a class whose name ends in "Env".');
  }
  const size = bytesOver(code, limits.maxCodeBytes);
  if (size > 0) {
    throw new EnvContractError(
      `The environment code is ${Math.ceil(size / 1024)} KiB; the limit is ${limits.maxCodeBytes / 1024} KiB. Shorten it.`,
      { bytes: size },
    );
  }
  const depth = nestingDepth(code, true, MAX_NESTING);
  if (depth > MAX_NESTING) {
    throw new EnvContractError(
      `The environment code nests brackets more than ${MAX_NESTING} deep, which the sandbox cannot parse safely. Flatten it: build deep data in a loop instead of writing it out.`,
      { depth },
    );
  }
  const names = envClassNames(code);
  if (names.length === 0) {
    throw new EnvContractError(
      'No environment class found. Define one at top level whose name ends in "Env", e.g. `class MazeEnv { ... }`.',
    );
  }
  return names;
}

/** Refuse, before the guest sees it, an action too long or too deeply nested for it to parse safely. */
export function checkAction(action: string, limits: SandboxLimits): void {
  const max = limits.maxActionChars ?? DEFAULT_LIMITS.maxActionChars;
  if (action.length > max) {
    throw new ActionRejectedError(
      `The action is ${action.length} characters; the limit is ${max} (maxActionKiB). Reply with one short action.`,
      { chars: action.length, limit: max },
    );
  }
  const depth = nestingDepth(action, false, MAX_NESTING);
  if (depth > MAX_NESTING) {
    throw new ActionRejectedError(
      `The action nests brackets more than ${MAX_NESTING} deep; the sandbox refuses it unread. Reply with a flat action.`,
      { depth, limit: MAX_NESTING },
    );
  }
}

/** Refuse an observation over maxObservationBytes (UTF-8). */
export function checkObservation(obs: string, limits: SandboxLimits, method: string): void {
  const n = bytesOver(obs, limits.maxObservationBytes);
  if (n > 0) {
    throw new EnvContractError(
      `${method}() returned a ${Math.ceil(n / 1024)} KiB observation; the limit is ${limits.maxObservationBytes / 1024} KiB. Keep observations short.`,
      { method, bytes: n },
    );
  }
}
