// Reading model replies: the designer's program, the hint, the validator's verdict, hint leaks,
// and the agent's format errors.
import { describe, expect, it } from 'vitest';
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
