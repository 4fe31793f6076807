/**
 * Reading model replies: the designer's program, the hint, the validator's verdict;
 * hint-leak detection.
 */

/** The program in a reply: the fenced block that defines an *Env class (the longest if several), else the bare text if it does. */
export function extractCode(reply: string): string | null {
  const blocks = [...reply.matchAll(/```[ \t]*(?:javascript|js|typescript|ts)?[ \t]*\n([\s\S]*?)```/gi)].map((m) =>
    m[1]!.trim(),
  );
  // an unterminated final block (reply cut at max_tokens) still counts
  const open = /```[ \t]*(?:javascript|js)?[ \t]*\n([\s\S]*)$/i.exec(reply.replace(/```[\s\S]*?```/g, ''));
  if (open) blocks.push(open[1]!.trim());
  const withEnv = blocks.filter((b) => /class\s+\w*Env\b/.test(b));
  if (withEnv.length) return withEnv.sort((a, b) => b.length - a.length)[0]!;
  return /class\s+\w*Env\b/.test(reply) ? reply.trim() : null;
}

/** The hint text: first paragraph, without quotes or a "Hint:" label, at most 400 characters. */
export function extractHint(reply: string): string {
  const t = reply
    .replace(/<think>[\s\S]*?<\/think>/g, '')
    .trim()
    .replace(/^(\*\*)?hint:?(\*\*)?\s*/i, '')
    .split(/\n\s*\n/)[0]!
    .trim()
    .replace(/^["'“]|["'”]$/g, '');
  return t.slice(0, 400);
}

export function parseVerdict(reply: string): { accept: boolean; reason: string } {
  const m = /VERDICT:\s*(ACCEPT|REJECT)\s*(.*)$/im.exec(reply);
  if (!m) return { accept: true, reason: 'no verdict given (lenient: accepted)' };
  return { accept: m[1]!.toUpperCase() === 'ACCEPT', reason: m[2]!.trim() };
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
      const inner = [
        ...a.matchAll(/\\boxed\{([^}]*)\}|<answer>([\s\S]*?)<\/answer>|"arguments"\s*:\s*(\{[\s\S]*?\})/g),
      ].map((m) => m[1] ?? m[2] ?? m[3] ?? '');
      for (const s of inner) for (const tok of s.match(/\d{2,}|[A-Za-z]{4,}/g) ?? []) values.add(tok.toLowerCase());
    }
  }
  const visible = observations.join(' ').toLowerCase();
  const h = hint.toLowerCase();
  return [...values].filter((v) => !visible.includes(v) && new RegExp(`(^|[^a-z0-9])${v}([^a-z0-9]|$)`).test(h)).sort();
}
