// The mutant runner's pure parts (scripts/mutants.js): a mutant applies only where its snippet
// occurs exactly once (else it is stale, never silently skipped), test files map to their vitest
// project, and the curated list (scripts/mutants.list.js) is well formed — every field present,
// ids unique, every named test file there. Running the mutants themselves is `npm run mutants`.
import { describe, expect, it } from 'vitest';
import { applyMutant, listProblems, projectOf, testsOf, type Mutant } from '../../scripts/mutants.js';
import { MUTANTS } from '../../scripts/mutants.list.js';

const m = (over: Partial<Mutant> = {}): Mutant => ({
  id: 'x',
  file: 'src/core/limiter.ts',
  find: 'a < b',
  replace: 'a <= b',
  test: 'tests/unit/llm.test.ts',
  why: 'because',
  ...over,
});

describe('mutant runner', () => {
  it('applies a snippet that occurs exactly once', () => {
    expect(applyMutant('if (a < b) go();', m())).toEqual({ ok: true, text: 'if (a <= b) go();' });
    expect(applyMutant('x = 1;', m({ find: 'x = 1;', replace: '' }))).toEqual({ ok: true, text: '' });
  });

  it('reports a snippet that is missing or occurs twice as stale', () => {
    expect(applyMutant('if (a > b) go();', m())).toEqual({
      ok: false,
      reason: 'snippet not found in src/core/limiter.ts',
    });
    expect(applyMutant('a < b; a < b;', m())).toEqual({
      ok: false,
      reason: 'snippet occurs more than once in src/core/limiter.ts',
    });
  });

  it('maps test files to their project and refuses others', () => {
    expect(projectOf('tests/unit/llm.test.ts')).toBe('unit');
    expect(projectOf('tests/gpu/grpo_clip_band.test.ts')).toBe('gpu');
    expect(() => projectOf('src/core/limiter.ts')).toThrow(/not under tests\/unit/);
    expect(testsOf(m({ test: ['tests/unit/a.test.ts', 'tests/unit/b.test.ts'] }))).toHaveLength(2);
  });

  it('finds mistakes in a list', () => {
    expect(
      listProblems([
        m(),
        m(),
        m({ id: 'y', why: '', test: 'tests/unit/no_such.test.ts' }),
        m({ id: 'z', replace: 'a < b' }),
      ]),
    ).toEqual([
      'x: the id is used twice',
      'y: no why',
      'y: test file tests/unit/no_such.test.ts does not exist',
      'z: replace equals find',
    ]);
  });

  it('the curated list is well formed and holds at least sixty mutants, in at least five rooms of the house', () => {
    expect(listProblems(MUTANTS)).toEqual([]);
    expect(MUTANTS.length).toBeGreaterThanOrEqual(60);
    // the room of a mutant's file: src/<room>/… (core, engine, lab, platform, state, cli, ui) or workers/
    const rooms = new Set(MUTANTS.map((x) => /^(?:src\/)?([^/]+)\//.exec(x.file)![1]));
    for (const room of rooms)
      expect(['core', 'engine', 'lab', 'platform', 'state', 'cli', 'ui', 'workers']).toContain(room);
    expect(rooms.size).toBeGreaterThanOrEqual(5);
  });
});
