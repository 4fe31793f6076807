/**
 * Reading model replies: the designer's program, the hint, the validator's verdict;
 * hint-leak detection.
 *
 * Model text is hostile input of up to maxReplyChars (and a replayed or imported reply can be
 * larger), and in the browser this runs on the main thread, so every reader here is a linear scan
 * (indexOf from a moving position, never a backtracking regular expression that a reply like
 * "```" + 10 MB of spaces, or "<think>" a million times, turns quadratic). Each function gives the
 * same result as the regular expression quoted in its comment.
 */

/** JavaScript's `\s`: WhiteSpace and LineTerminator. */
function isSpace(c: number): boolean {
  return (
    (c >= 9 && c <= 13) ||
    c === 32 ||
    c === 0xa0 ||
    c === 0x1680 ||
    (c >= 0x2000 && c <= 0x200a) ||
    c === 0x2028 ||
    c === 0x2029 ||
    c === 0x202f ||
    c === 0x205f ||
    c === 0x3000 ||
    c === 0xfeff
  );
}

/** JavaScript's `\w`: [A-Za-z0-9_]. */
function isWord(c: number): boolean {
  return (c >= 48 && c <= 57) || (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || c === 95;
}

/** Whether `text` at `at` starts with the lowercase ASCII `word`, ignoring ASCII case. */
function startsWithCI(text: string, word: string, at: number): boolean {
  if (at + word.length > text.length) return false;
  for (let i = 0; i < word.length; i++) if ((text.charCodeAt(at + i) | 0x20) !== word.charCodeAt(i)) return false;
  return true;
}

/** Where "verdict:" (any ASCII case) next starts at or after `from`; -1 if none. A literal: no backtracking. */
function indexOfVerdict(text: string, from: number): number {
  const re = /verdict:/gi;
  re.lastIndex = from;
  return re.exec(text)?.index ?? -1;
}

const FENCE = '```';
const BACKTICK = 96;

/**
 * The next fence at or after `from` that could open a block: three backticks not followed by a
 * fourth (in a run of backticks only the last three can be followed by a header); -1 if none.
 */
function nextOpener(text: string, from: number): number {
  const i = text.indexOf(FENCE, from);
  if (i < 0) return -1;
  let j = i + FENCE.length;
  while (text.charCodeAt(j) === BACKTICK) j++;
  return j - FENCE.length;
}

function skipBlanks(text: string, i: number): number {
  while (text.charCodeAt(i) === 32 || text.charCodeAt(i) === 9) i++;
  return i;
}

/**
 * After a fence at `at`, the header `[ \t]*(?:lang)?[ \t]*\n` (languages matched ignoring case):
 * the index just past its newline, or -1.
 */
function fenceHeaderEnd(text: string, at: number, langs: readonly string[]): number {
  const i = skipBlanks(text, at + FENCE.length);
  if (text.charCodeAt(i) === 10) return i + 1;
  for (const lang of langs) {
    if (!startsWithCI(text, lang, i)) continue;
    const k = skipBlanks(text, i + lang.length);
    // no language here is a prefix of another, so the first that fits is the only one
    return text.charCodeAt(k) === 10 ? k + 1 : -1;
  }
  return -1;
}

/** `/class\s+\w*Env\b/`: "class", whitespace, then a word that ends in "Env". */
function definesEnvClass(text: string): boolean {
  for (let i = text.indexOf('class'); i >= 0; i = text.indexOf('class', i + 1)) {
    let j = i + 5;
    if (!isSpace(text.charCodeAt(j))) continue;
    while (j < text.length && isSpace(text.charCodeAt(j))) j++;
    let k = j;
    while (k < text.length && isWord(text.charCodeAt(k))) k++;
    if (k - j >= 3 && text.startsWith('Env', k - 3)) return true;
  }
  return false;
}

/** `/```[ \t]*(?:javascript|js|typescript|ts)?[ \t]*\n([\s\S]*?)```/gi`: every closed fenced block, trimmed. */
function closedBlocks(reply: string): string[] {
  const langs = ['javascript', 'js', 'typescript', 'ts'];
  const out: string[] = [];
  let at = nextOpener(reply, 0);
  while (at >= 0) {
    const body = fenceHeaderEnd(reply, at, langs);
    if (body < 0) {
      at = nextOpener(reply, at + 1);
      continue;
    }
    const close = reply.indexOf(FENCE, body);
    if (close < 0) break; // no later opener can close either
    out.push(reply.slice(body, close).trim());
    at = nextOpener(reply, close + FENCE.length);
  }
  return out;
}

/**
 * An unterminated final block: `reply.replace(/```[\s\S]*?```/g, '')` (drop fence pairs), then
 * `/```[ \t]*(?:javascript|js)?[ \t]*\n([\s\S]*)$/i` in what is left; its text, trimmed, or null.
 */
function openBlock(reply: string): string | null {
  const kept: string[] = [];
  let pos = 0;
  for (;;) {
    const a = reply.indexOf(FENCE, pos);
    if (a < 0) break;
    const b = reply.indexOf(FENCE, a + FENCE.length);
    if (b < 0) break;
    if (a > pos) kept.push(reply.slice(pos, a));
    pos = b + FENCE.length;
  }
  kept.push(reply.slice(pos));
  const rest = kept.join('');
  for (let at = nextOpener(rest, 0); at >= 0; at = nextOpener(rest, at + 1)) {
    const body = fenceHeaderEnd(rest, at, ['javascript', 'js']);
    if (body >= 0) return rest.slice(body).trim();
  }
  return null;
}

/** The program in a reply: the fenced block that defines an *Env class (the longest if several), else the bare text if it does. */
export function extractCode(reply: string): string | null {
  const blocks = closedBlocks(reply);
  // an unterminated final block (reply cut at max_tokens) still counts
  const open = openBlock(reply);
  if (open !== null) blocks.push(open);
  const withEnv = blocks.filter(definesEnvClass);
  if (withEnv.length) return withEnv.sort((a, b) => b.length - a.length)[0]!;
  return definesEnvClass(reply) ? reply.trim() : null;
}

/** `s.replace(/<think>[\s\S]*?<\/think>/g, '')`. */
function dropThinking(s: string): string {
  const kept: string[] = [];
  let pos = 0;
  for (;;) {
    const a = s.indexOf('<think>', pos);
    if (a < 0) break;
    const b = s.indexOf('</think>', a + 7);
    if (b < 0) break;
    if (a > pos) kept.push(s.slice(pos, a));
    pos = b + 8;
  }
  kept.push(s.slice(pos));
  return kept.join('');
}

/** `s.split(/\n\s*\n/)[0]`: the text before the first blank line. */
function firstParagraph(s: string): string {
  for (let a = s.indexOf('\n'); a >= 0;) {
    let i = a + 1;
    while (i < s.length && isSpace(s.charCodeAt(i))) {
      if (s.charCodeAt(i) === 10) return s.slice(0, a);
      i++;
    }
    a = s.indexOf('\n', i);
  }
  return s;
}

/** The hint text: first paragraph, without quotes or a "Hint:" label, at most 400 characters. */
export function extractHint(reply: string): string {
  const t = firstParagraph(
    dropThinking(reply)
      .trim()
      .replace(/^(\*\*)?hint:?(\*\*)?\s*/i, ''), // anchored at the start: tried once
  )
    .trim()
    .replace(/^["'“]|["'”]$/g, ''); // one character at either end
  return t.slice(0, 400);
}

/**
 * `/VERDICT:\s*(ACCEPT|REJECT)\s*(.*)$/im`: the first "VERDICT:" (any case) followed by ACCEPT or
 * REJECT; the reason is the rest of the line after any whitespace (a verdict alone on its line takes
 * the next non-blank line as its reason, as the expression did).
 */
export function parseVerdict(reply: string): { accept: boolean; reason: string } {
  for (let at = indexOfVerdict(reply, 0); at >= 0; at = indexOfVerdict(reply, at + 1)) {
    let i = at + 8;
    while (i < reply.length && isSpace(reply.charCodeAt(i))) i++;
    const accept = startsWithCI(reply, 'accept', i);
    if (!accept && !startsWithCI(reply, 'reject', i)) continue;
    i += 6;
    while (i < reply.length && isSpace(reply.charCodeAt(i))) i++;
    let end = i;
    while (end < reply.length && !isLineTerminator(reply.charCodeAt(end))) end++;
    return { accept, reason: reply.slice(i, end).trim() };
  }
  return { accept: true, reason: 'no verdict given (lenient: accepted)' };
}

function isLineTerminator(c: number): boolean {
  return c === 10 || c === 13 || c === 0x2028 || c === 0x2029;
}

/**
 * `/\\boxed\{([^}]*)\}|<answer>([\s\S]*?)<\/answer>|"arguments"\s*:\s*(\{[\s\S]*?\})/g`: the inner
 * texts, in order. Each opener's closer is searched once and reused while it lies ahead, so a
 * solution that opens a million times and never closes stays linear.
 */
function solutionValues(a: string): string[] {
  const out: string[] = [];
  // The next occurrence of each needle, kept while it lies ahead; -1 once there is none.
  let boxed = -2;
  let answer = -2;
  let args = -2;
  let brace = -2;
  let answerEnd = -2;
  const ahead = (known: number, needle: string, from: number) =>
    known === -1 || known >= from ? known : a.indexOf(needle, from);
  let pos = 0;
  while (pos < a.length) {
    boxed = ahead(boxed, '\\boxed{', pos);
    answer = ahead(answer, '<answer>', pos);
    args = ahead(args, '"arguments"', pos);
    let at = -1;
    for (const i of [boxed, answer, args]) if (i >= 0 && (at < 0 || i < at)) at = i;
    if (at < 0) break;
    let end = -1;
    if (at === boxed) {
      brace = ahead(brace, '}', at + 7);
      if (brace >= 0) {
        out.push(a.slice(at + 7, brace));
        end = brace + 1;
      }
    } else if (at === answer) {
      answerEnd = ahead(answerEnd, '</answer>', at + 8);
      if (answerEnd >= 0) {
        out.push(a.slice(at + 8, answerEnd));
        end = answerEnd + 9;
      }
    } else {
      let i = at + 11;
      while (i < a.length && isSpace(a.charCodeAt(i))) i++;
      if (a.charCodeAt(i) === 58 /* : */) {
        i++;
        while (i < a.length && isSpace(a.charCodeAt(i))) i++;
        if (a.charCodeAt(i) === 123 /* { */) {
          brace = ahead(brace, '}', i + 1);
          if (brace >= 0) {
            out.push(a.slice(i, brace + 1));
            end = brace + 1;
          }
        }
      }
    }
    pos = end >= 0 ? end : at + 1;
  }
  return out;
}

/** The maximal runs of [a-z0-9] in `h` (already lowercase). */
function alnumRuns(h: string): Set<string> {
  const runs = new Set<string>();
  let start = -1;
  for (let i = 0; i <= h.length; i++) {
    const c = i < h.length ? h.charCodeAt(i) : 0;
    const alnum = (c >= 48 && c <= 57) || (c >= 97 && c <= 122);
    if (alnum && start < 0) start = i;
    else if (!alnum && start >= 0) {
      runs.add(h.slice(start, i));
      start = -1;
    }
  }
  return runs;
}

/**
 * Literal hidden values in a hint: values that appear in the reference solutions
 * (numbers of 2+ digits, words of 4+ letters inside \boxed{}, <answer> or tool
 * arguments) and also in the hint, but not in the environment's own instructions.
 */
export function leakedValues(hint: string, solutions: string[][], observations: string[]): string[] {
  const values = new Set<string>();
  for (const sol of solutions) {
    for (const a of sol) {
      for (const s of solutionValues(a))
        for (const tok of s.match(/\d{2,}|[A-Za-z]{4,}/g) ?? []) values.add(tok.toLowerCase());
    }
  }
  const visible = observations.join(' ').toLowerCase();
  // A value (letters or digits only) stands alone in the hint iff it is a whole run of [a-z0-9] there.
  const words = alnumRuns(hint.toLowerCase());
  return [...values].filter((v) => words.has(v) && !visible.includes(v)).sort();
}
