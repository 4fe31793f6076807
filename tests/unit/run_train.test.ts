// `spade run --train` end to end on a fresh tiny checkpoint (CPU backend): the run trains after
// each cycle and leaves the adapter (PEFT), the optimiser state and the probe under DIR/train/;
// --resume continues from them; a backend that training cannot change is refused with the fix.
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { main } from '../../src/cli/spade.ts';

async function spade(...argv: string[]) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await main(argv, { out: (l) => out.push(l), err: (l) => err.push(l) });
  return { code, out, err, json: () => JSON.parse(out[out.length - 1]!) };
}

let dir: string;
const small = [
  '--device',
  'cpu',
  '--corpus',
  'none',
  '--set',
  'skillsPerCycle=1',
  '--set',
  'envsPerSkill=2',
  '--set',
  'playsPerEnv=1',
  '--set',
  'maxTurns=2',
  '--set',
  'designerMaxTokens=500',
  '--set',
  'repairTurns=0',
  '--set',
  'agentTokenBudget=100',
];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'spade-train-'));
  const r = await spade(
    'engine',
    'init',
    '--arch',
    'qwen2',
    '--layers',
    '1',
    '--hidden',
    '32',
    '--out',
    join(dir, 'm'),
    '--seed',
    '2',
  );
  expect(r.code, r.err.join('\n')).toBe(0);
});

describe('spade run --train', () => {
  it('trains after each cycle, saves the adapter and optimiser, and resumes from them', async () => {
    const out = join(dir, 'run');
    const a = await spade(
      'run',
      '--backend',
      'local',
      '--model-dir',
      join(dir, 'm'),
      '--train',
      '--iterations',
      '1',
      '--out',
      out,
      ...small,
      '--json',
    );
    expect(a.code, a.err.join('\n')).toBe(0);
    // every call went through the engine's batching scheduler; the repair turns and plays reused cached k/v
    const decode = a.json().decode;
    expect(decode.steps).toBeGreaterThan(0);
    expect(decode.maxRows).toBeGreaterThanOrEqual(1);
    expect(decode.prefillTokens).toBeGreaterThan(0);
    expect(decode.prefixReusedTokens).toBeGreaterThan(0);
    console.log(`spade run --backend local decode stats: ${JSON.stringify(decode)}`);
    expect(a.err.join('\n')).toMatch(/probe \(before training\): 6\/6 plays · .* · mean return/);
    expect(a.err.join('\n')).toMatch(/trained after cycle 1:/);
    // progress from the first line, in order: the load, the fresh-model warning (at once, before any
    // model call), the probe announced before it plays, its result, the training round, its summary
    const at = (re: RegExp) => a.err.findIndex((l) => re.test(l));
    const order = [
      at(/^loading the checkpoint in .*\(cpu\)…$/),
      at(/^warning: .* is a fresh random model \(259 token ids, random weights\)/),
      at(/^probe \(before training\): the agent plays the probe environments/),
      at(/^probe \(before training\): 6\/6 plays · .* · mean return/),
      at(/^training on cycle 1, round 1: \d+ agent and \d+ designer samples…$/),
      at(/^trained after cycle 1:/),
    ];
    expect(order[0]).toBe(0);
    expect(
      order.every((i, k) => i >= 0 && (k === 0 || i > order[k - 1]!)),
      a.err.join('\n'),
    ).toBe(true);
    expect(a.err[order[1]!]).toMatch(/no valid\s+environments[\s\S]*--backend openai[\s\S]*ollama pull/);
    // the probe is never silent: off a terminal, one progress line per play finished (6 plays: 1/6 to
    // 5/6, then the result line 6/6), each with the time so far, after the first an estimate, and the play
    const probeLines = a.err.filter((l) => /^probe \(before training\): \d\/6 plays · /.test(l));
    expect(probeLines.map((l) => l.split(' ')[3])).toEqual(['1/6', '2/6', '3/6', '4/6', '5/6', '6/6']);
    for (const l of probeLines.slice(0, 5))
      expect(l).toMatch(
        /^probe \(before training\): \d\/6 plays · \d+ s(?: · about \S+ s left)? · .+, seed (101|202)$/,
      );
    // the window is said at the start, with where it came from
    expect(a.err).toContain("context window: 2,048 tokens, the checkpoint's");
    // each cycle counts its environments as they finish
    expect(a.err.filter((l) => /^cycle 1\/1: \d\/2 environments · /.test(l)).map((l) => l.split(' ')[2])).toEqual([
      '1/2',
      '2/2',
    ]);
    for (const f of [
      'adapter_config.json',
      'adapter_model.safetensors',
      'optimizer.safetensors',
      'state.json',
      'probe.jsonl',
    ])
      expect(existsSync(join(out, 'train', f)), f).toBe(true);
    const state = JSON.parse(await readFile(join(out, 'train', 'state.json'), 'utf8'));
    expect(state.trainedThrough).toBe(0);
    const adapter = JSON.parse(await readFile(join(out, 'train', 'adapter_config.json'), 'utf8'));
    expect(adapter).toMatchObject({ peft_type: 'LORA', r: 8, lora_alpha: 16 });
    const b = await spade(
      'run',
      '--backend',
      'local',
      '--model-dir',
      join(dir, 'm'),
      '--train',
      '--iterations',
      '2',
      '--out',
      out,
      '--resume',
      '--device',
      'cpu',
      '--corpus',
      'none',
      '--json',
    );
    expect(b.code, b.err.join('\n')).toBe(0);
    expect(b.json()).toMatchObject({ cycles: 2 });
    expect(JSON.parse(await readFile(join(out, 'train', 'state.json'), 'utf8')).trainedThrough).toBe(1);
    expect(b.err.join('\n')).not.toMatch(/before training/); // the probe before training ran once
  }, 300_000);

  it('refuses to train a model it does not sample from, naming the fix', async () => {
    const transcript = join(dir, 'replay.jsonl');
    await writeFile(transcript, '{"format":"spade-replay","version":1,"backend":"openai","model":"x"}\n');
    const r = await spade(
      'run',
      '--backend',
      'replay',
      '--replay',
      transcript,
      '--train',
      '--iterations',
      '1',
      '--out',
      join(dir, 'x'),
    );
    expect(r.code).toBe(2);
    expect(r.err.join('\n')).toMatch(/--train needs --backend local/);
    expect(r.err.join('\n')).toMatch(/The designer samples from replay:openai:x, which training does not change/);
  });
});
