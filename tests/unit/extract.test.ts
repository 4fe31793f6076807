// Reading model replies: the designer's program, the hint, the validator's verdict, hint leaks,
// and the agent's format errors. The readers are linear scans; the regular expressions they replace
// are kept below as the reference they must agree with, on thousands of random replies, and the
// scans are run on adversarial 1 MB and 10 MB replies (the old expressions took minutes on these).
import { describe, expect, it } from 'vitest';
import { extractBoxed } from '../../src/core/env/contract.ts';
import { createRng } from '../../src/core/rng.ts';
import { isFormatError } from '../../src/core/spade/agent.ts';
import { extractCode, extractHint, leakedValues, parseVerdict } from '../../src/core/spade/extract.ts';

describe('extractCode', () => {
  it('takes the fenced block that defines an Env class (the longest of several)', () => {
    const reply =
      'Intro\n```js\nconst helper = 1;\n```\nThen:\n```javascript\nclass AEnv {}\n```\nand\n```javascript\nclass BiggerEnv { reset() {} }\n```';
    expect(extractCode(reply)).toBe('class BiggerEnv { reset() {} }');
  });
  it('accepts an unterminated final block (reply cut at max_tokens) and bare code', () => {
    expect(extractCode('Sure:\n```javascript\nclass CutEnv {\n  reset() {')).toBe('class CutEnv {\n  reset() {');
    expect(extractCode('class PlainEnv { }')).toBe('class PlainEnv { }');
    expect(extractCode('I cannot do that.')).toBeNull();
  });
});

describe('extractHint and parseVerdict', () => {
  it('keeps the first paragraph, without a label or quotes, at most 400 characters', () => {
    expect(extractHint('<think>hmm</think>\n**Hint:** "Probe the middle first."\n\nMore text.')).toBe(
      'Probe the middle first.',
    );
    expect(extractHint('x'.repeat(1000))).toHaveLength(400);
  });
  it('reads the last verdict line; no verdict is a lenient accept', () => {
    expect(parseVerdict('reasoning...\nVERDICT: REJECT the goal holds at reset')).toEqual({
      accept: false,
      reason: 'the goal holds at reset',
    });
    expect(parseVerdict('VERDICT: accept')).toEqual({ accept: true, reason: '' });
    expect(parseVerdict('looks fine')).toEqual({ accept: true, reason: 'no verdict given (lenient: accepted)' });
  });
});

describe('leakedValues', () => {
  it('finds hidden values from the solutions that the hint spells out, ignoring ones the observation shows', () => {
    const solutions = [['\\boxed{gear 13}', '\\boxed{answer 981}'], ['\\boxed{answer 407}']];
    const obs = ['Inspect a gear with \\boxed{gear k}; answer with \\boxed{answer n}.'];
    expect(leakedValues('Try gears 13 and 15; the answer is 981.', solutions, obs)).toEqual(['13', '981']);
    expect(leakedValues('Combine remainders from coprime gears.', solutions, obs)).toEqual([]);
    expect(leakedValues('Use the gear command.', solutions, obs)).toEqual([]); // "gear" is in the instructions
    const tool = [
      ['<tool_call>{"name": "get", "arguments": {"city": "Valparaiso"}}</tool_call>', '<answer>Valparaiso</answer>'],
    ];
    expect(leakedValues('The city is Valparaiso.', tool, ['Find the city.'])).toEqual(['valparaiso']);
  });
});

describe('agent format errors', () => {
  it('needs \\boxed{} in games and a tag in tool use', () => {
    expect(isFormatError('games', 'I think \\boxed{3}')).toBe(false);
    expect(isFormatError('games', 'three')).toBe(true);
    expect(isFormatError('tool_use', '<answer>4</answer>')).toBe(false);
    expect(isFormatError('tool_use', '<tool_call>{"name":"x"}</tool_call>')).toBe(false);
    expect(isFormatError('tool_use', 'answer: 4')).toBe(true);
  });
});

// ---- the previous regular-expression readers: the reference the scans must agree with ----
const ref = {
  extractCode(reply: string): string | null {
    const blocks = [...reply.matchAll(/```[ \t]*(?:javascript|js|typescript|ts)?[ \t]*\n([\s\S]*?)```/gi)].map((m) =>
      m[1]!.trim(),
    );
    const open = /```[ \t]*(?:javascript|js)?[ \t]*\n([\s\S]*)$/i.exec(reply.replace(/```[\s\S]*?```/g, ''));
    if (open) blocks.push(open[1]!.trim());
    const withEnv = blocks.filter((b) => /class\s+\w*Env\b/.test(b));
    if (withEnv.length) return withEnv.sort((a, b) => b.length - a.length)[0]!;
    return /class\s+\w*Env\b/.test(reply) ? reply.trim() : null;
  },
  extractHint(reply: string): string {
    const t = reply
      .replace(/<think>[\s\S]*?<\/think>/g, '')
      .trim()
      .replace(/^(\*\*)?hint:?(\*\*)?\s*/i, '')
      .split(/\n\s*\n/)[0]!
      .trim()
      .replace(/^["'“]|["'”]$/g, '');
    return t.slice(0, 400);
  },
  parseVerdict(reply: string): { accept: boolean; reason: string } {
    const m = /VERDICT:\s*(ACCEPT|REJECT)\s*(.*)$/im.exec(reply);
    if (!m) return { accept: true, reason: 'no verdict given (lenient: accepted)' };
    return { accept: m[1]!.toUpperCase() === 'ACCEPT', reason: m[2]!.trim() };
  },
  leakedValues(hint: string, solutions: string[][], observations: string[]): string[] {
    const values = new Set<string>();
    for (const sol of solutions)
      for (const a of sol) {
        const inner = [
          ...a.matchAll(/\\boxed\{([^}]*)\}|<answer>([\s\S]*?)<\/answer>|"arguments"\s*:\s*(\{[\s\S]*?\})/g),
        ].map((m) => m[1] ?? m[2] ?? m[3] ?? '');
        for (const x of inner) for (const tok of x.match(/\d{2,}|[A-Za-z]{4,}/g) ?? []) values.add(tok.toLowerCase());
      }
    const visible = observations.join(' ').toLowerCase();
    const h = hint.toLowerCase();
    return [...values]
      .filter((v) => !visible.includes(v) && new RegExp(`(^|[^a-z0-9])${v}([^a-z0-9]|$)`).test(h))
      .sort();
  },
  isFormatError(setting: 'games' | 'tool_use', reply: string): boolean {
    return setting === 'games'
      ? extractBoxed(reply) === null
      : !/<tool_call>[\s\S]*?<\/tool_call>|<answer>[\s\S]*?<\/answer>/.test(reply);
  },
};

/** Pieces that the readers care about, glued at random: fences, languages, tags, verdicts, odd spaces. */
const PIECES = [
  '```',
  '`',
  '``',
  'js',
  'JavaScript',
  'ts',
  'typescript',
  'tsx',
  'python',
  ' ',
  '\t',
  '\n',
  '\r\n',
  '\n\n',
  ' \n',
  '\u00a0',
  '\u2028',
  'class',
  ' class ',
  'Env',
  'FooEnv',
  'Envy',
  'x',
  'abc_1',
  '{',
  '}',
  '\\boxed{',
  '<think>',
  '</think>',
  'hint:',
  '**Hint:**',
  'HINT',
  '"',
  '“',
  '”',
  "'",
  'VERDICT:',
  'verdict:',
  'ACCEPT',
  'reject',
  'Accepted',
  'because',
  '<answer>',
  '</answer>',
  '<tool_call>',
  '</tool_call>',
  '"arguments"',
  ':',
  ' : ',
  'gear 13',
  '981',
  'city',
  'Valparaiso',
  'é',
  'İ',
];

function randomText(rng: ReturnType<typeof createRng>, max: number): string {
  const n = rng.int(max);
  let t = '';
  for (let i = 0; i < n; i++) t += rng.pick(PIECES);
  return t;
}

describe('the linear readers agree with the regular expressions they replace', () => {
  it('on 4,000 random replies made of fences, tags, verdicts and odd whitespace', () => {
    const rng = createRng(9);
    for (let i = 0; i < 4000; i++) {
      const t = randomText(rng, 40);
      expect(extractCode(t), t).toBe(ref.extractCode(t));
      expect(extractHint(t), t).toBe(ref.extractHint(t));
      expect(parseVerdict(t), t).toEqual(ref.parseVerdict(t));
      expect(isFormatError('tool_use', t), t).toBe(ref.isFormatError('tool_use', t));
      const sols = [[randomText(rng, 12), randomText(rng, 12)], [randomText(rng, 12)]];
      const obs = [randomText(rng, 8)];
      expect(leakedValues(t, sols, obs), t).toEqual(ref.leakedValues(t, sols, obs));
    }
  });
});

describe('adversarial replies of 1 MB and 10 MB are read in linear time', () => {
  // Each case: a hostile reply built for a size, and what every reader must return on it.
  const cases: { name: string; make: (n: number) => string; check: (t: string) => void }[] = [
    {
      name: 'fences only',
      make: (n) => '```'.repeat(n / 3),
      check: (t) => {
        expect(extractCode(t)).toBeNull();
        expect(extractHint(t)).toBe('`'.repeat(400));
      },
    },
    {
      name: 'a fence then spaces, no newline',
      make: (n) => '``` js' + ' \t'.repeat(n / 2),
      check: (t) => expect(extractCode(t)).toBeNull(),
    },
    {
      name: 'an unclosed block defining an Env',
      make: (n) => '```js\nclass HugeEnv {\n' + '`'.repeat(n),
      check: (t) => expect(extractCode(t)?.startsWith('class HugeEnv {')).toBe(true),
    },
    {
      name: '"class" then a long word',
      make: (n) => 'class ' + 'E'.repeat(n) + 'x',
      check: (t) => expect(extractCode(t)).toBeNull(),
    },
    {
      name: '\\boxed{ repeated, never closed',
      make: (n) => '\\boxed{'.repeat(n / 7),
      check: (t) => {
        expect(isFormatError('games', t)).toBe(true);
        expect(leakedValues('boxed', [[t]], [])).toEqual([]);
      },
    },
    {
      name: '<tool_call> and <answer> repeated, never closed',
      make: (n) => '<tool_call><answer>'.repeat(n / 19),
      check: (t) => {
        expect(isFormatError('tool_use', t)).toBe(true);
        expect(isFormatError('tool_use', t + '</answer>')).toBe(false);
        expect(leakedValues('answer', [[t]], [])).toEqual([]);
      },
    },
    {
      name: '<think> repeated, never closed',
      make: (n) => '<think>'.repeat(n / 7),
      check: (t) => expect(extractHint(t)).toBe(t.slice(0, 400)),
    },
    {
      name: 'lines of whitespace, never a blank line',
      make: (n) => 'Tip' + '\n \t x'.repeat(n / 5),
      check: (t) => expect(extractHint(t)).toBe(t.slice(0, 400)),
    },
    {
      name: 'VERDICT: then whitespace, repeated',
      make: (n) => 'VERDICT:   \n'.repeat(n / 12) + 'VERDICT: REJECT at last',
      check: (t) => expect(parseVerdict(t)).toEqual({ accept: false, reason: 'at last' }),
    },
    {
      name: '"arguments": then spaces, repeated',
      make: (n) => '"arguments" :  '.repeat(n / 15) + '"arguments": {"city": "Lima"}',
      check: (t) => expect(leakedValues('Lima it is', [[t]], [])).toEqual(['lima']),
    },
  ];
  for (const size of [1_000_000, 10_000_000]) {
    it(`${size / 1e6} MB`, () => {
      const lines: string[] = [];
      for (const c of cases) {
        const t = c.make(size);
        const t0 = performance.now();
        c.check(t);
        extractCode(t);
        extractHint(t);
        parseVerdict(t);
        isFormatError('tool_use', t);
        lines.push(`${c.name}: ${(performance.now() - t0).toFixed(0)} ms`);
      }
      // A benchmark line, not an assertion (speed targets live in `spade bench`).
      console.log(`[extract bench] ${size / 1e6} MB replies, all readers: ${lines.join('; ')}`);
    });
  }
});
