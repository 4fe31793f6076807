// The pure pieces behind the first hour: the toy demo's verdict and time-left estimate,
// the Run panel's progress line, the charts' y axis and the Models panel's "test connection".
import { describe, expect, it } from 'vitest';
import { axisRange, tickLabels } from '../../src/core/chart_range.ts';
import { corsRecipes, testConnection } from '../../src/core/llm/server_check.ts';
import { cycleProgress, formatSeconds } from '../../src/core/spade/run_progress.ts';
import type { TaskView } from '../../src/core/spade/run_events.ts';
import { toyVerdict } from '../../src/core/train/toy_verdict.ts';
import { toySecondsLeft } from '../../src/state/toy.svelte.ts';

const curve = (...r: number[]) => r.map((meanReturn) => ({ meanReturn }));

describe('the toy demo verdict', () => {
  it('says it learned when the last update reaches the bar from below, with the measured figures', () => {
    const v = toyVerdict(curve(0.125, 0.625, 0.875, 0.9375, 0.875, 1, 1, 1), 14.6);
    expect(v.learned).toBe(true);
    expect(v.text).toBe(
      'It learned: the model picked the winning digit 7 in 13% of its plays in update 1 and 100% in update 8 (15 s).',
    );
  });

  it('says plainly that it did not learn: below the bar, flat at the top, stopped early, or nothing finished', () => {
    const low = toyVerdict(curve(0.125, 0.25, 0.25), 9);
    expect(low.learned).toBe(false);
    expect(low.text).toMatch(
      /^It did not learn: .* 13% of its plays in update 1 and 25% in update 3 \(9 s\), below the 80% bar\.$/,
    );
    expect(toyVerdict(curve(0.9, 0.9), 3).text).toMatch(/it was already there at the start/);
    expect(toyVerdict(curve(0.125), 4, false).text).toMatch(/^It did not learn: .*stopped early/);
    expect(toyVerdict([], 1, false)).toEqual({
      learned: false,
      text: 'No update finished (1 s), so there is nothing to judge yet: press start again.',
    });
  });
});

describe('the Run panel progress line', () => {
  const task = (over: Partial<TaskView>): TaskView => ({
    index: 0,
    skill: 'spatial',
    source: null,
    excerpt: null,
    designer: '',
    attempts: [],
    hint: null,
    plays: [],
    record: null,
    error: null,
    ...over,
  });

  it('names the phase, counts environments, plays and characters, and estimates the time left', () => {
    const tasks = [
      task({
        designer: 'x'.repeat(1200),
        attempts: [{ ok: true, failures: [], soft: [] }],
        plays: [
          { play: 0, hinted: false, turns: [], result: 1, end: 'won' },
          { play: 0, hinted: true, turns: [], result: null, end: null },
        ] as TaskView['plays'],
      }),
      task({ index: 1, designer: 'class', attempts: [] }),
    ];
    expect(cycleProgress(tasks, 2, { elapsed: 30, done: [100, 140], after: 1 })).toBe(
      'playing · 1 of 2 environments valid so far, 0 finished · 1 of 4 plays · designer wrote 1,205 characters · 30 s in this cycle · about 3 min 30 s left',
    );
    expect(cycleProgress([], 4, { elapsed: 3, done: [], after: 0 })).toBe(
      'starting the cycle (skills, documents, memory) · 3 s in this cycle',
    );
    expect(cycleProgress([task({ designer: 'cla' })], 4, { elapsed: 12, done: [], after: 0 })).toMatch(
      /^designing and checking · 0 of 1 environments valid so far/,
    );
    expect(formatSeconds(580)).toBe('9 min 40 s');
  });
});

describe('the charts y axis', () => {
  it('ranges to the data within the bounds, so a 0–1 rate near 0.3 is not crowded at the bottom', () => {
    const [lo, hi] = axisRange(0.25, 0.35, [0, 1]); // at least a fifth of the bounds (tests/unit/chart_range.test.ts)
    expect(lo).toBeCloseTo(0.2);
    expect(hi).toBeCloseTo(0.4);
    expect(axisRange(0, 1, [0, 1])).toEqual([0, 1]);
    expect(axisRange(0, 0)).toEqual([-0.05, 0.05]); // a flat line at 0 still has a scale
    expect(axisRange(null, null, [0, 1])).toEqual([0, 1]);
  });

  it('labels ticks with the decimals their step needs', () => {
    expect(tickLabels([-0.04, -0.02, 0, 0.02, 0.04])).toEqual(['-0.04', '-0.02', '0', '0.02', '0.04']);
    expect(tickLabels([0, 0.25, 0.5, 0.75, 1])).toEqual(['0', '0.25', '0.50', '0.75', '1.00']);
    expect(tickLabels([0, 5, 10])).toEqual(['0', '5', '10']);
  });
});

describe('test connection', () => {
  const reply = (status: number, body: unknown) =>
    (async () => new Response(JSON.stringify(body), { status })) as unknown as typeof fetch;

  it('reports the listed models and the window the server gives for the chosen one', async () => {
    const list = { data: [{ id: 'Qwen/Qwen2.5-1.5B-Instruct', max_model_len: 32768 }, { id: 'other' }] };
    const r = await testConnection('http://127.0.0.1:8000/v1/', 'Qwen/Qwen2.5-1.5B-Instruct', '', reply(200, list));
    expect(r).toEqual({
      ok: true,
      models: ['Qwen/Qwen2.5-1.5B-Instruct', 'other'],
      contextWindow: 32768,
      message:
        'Connected: 2 models: Qwen/Qwen2.5-1.5B-Instruct, other. "Qwen/Qwen2.5-1.5B-Instruct" serves a context window of 32768 tokens (reported by the server).',
    });
    const missing = await testConnection('http://h/v1', 'nope', '', reply(200, list));
    expect(missing.message).toMatch(/"nope" is not among them/);
  });

  it('says what failed: no server or CORS, a key, a wrong URL', async () => {
    const refused = (async () => {
      throw new TypeError('Failed to fetch');
    }) as unknown as typeof fetch;
    expect((await testConnection('http://h/v1', 'm', '', refused)).message).toMatch(/CORS/);
    expect((await testConnection('http://h/v1', 'm', '', reply(401, {}))).message).toMatch(/API key/);
    expect((await testConnection('h/v1', 'm')).message).toMatch(/must start with http/);
    expect(corsRecipes('https://x.test').map((c) => c.server)).toEqual(['vLLM', 'Ollama', 'llama.cpp', 'SGLang']);
    expect(corsRecipes('https://x.test')[1]!.recipe).toContain('OLLAMA_ORIGINS=https://x.test');
  });
});

describe('the toy demo time-left estimate', () => {
  it('uses a recent update wall time (the median of the last three gaps), not the mean with the slow first one', () => {
    // arrivals (s since the click): the first update includes making the model; later ones are faster
    const arrivals = [14, 18, 21, 24];
    expect(toySecondsLeft(arrivals, 8)).toBe(3 * 4); // median of gaps 4, 3, 3 is 3; 4 updates to go
    // the old estimate, the mean per update over all arrivals, is twice as high here
    expect((24 / 4) * 4).toBe(2 * toySecondsLeft(arrivals, 8)!);
    expect(toySecondsLeft([10], 8)).toBe(70); // one update: its own time
    expect(toySecondsLeft([], 8)).toBeNull();
    expect(toySecondsLeft([5, 6, 7, 8, 9, 10, 11, 12], 8)).toBe(0);
  });
});
