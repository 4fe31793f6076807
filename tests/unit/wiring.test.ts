// The app's one owner of the URL hash and of the wiring between panels (src/state/wiring.svelte.ts), in
// Node over a hash double: a link with the app's keys, the Lab's (`lab.*`, `lab.hand`) and `#run=` is
// parsed once and each state is handed its part once (the race the curriculum, the run's review the
// file); the states write one hash, and only when its text changes; a hashchange hands over only what
// it changes; the run hands its cycles to training only while "train after every cycle" is on. Runes
// compile for the server here, so effects do not run: the test calls their bodies (writeHash, …) itself.
import { describe, expect, it, vi } from 'vitest';
import type { ChatModel } from '../../src/core/llm/chat_model.ts';
import { MemoryStore } from '../../src/core/store.ts';
import { parseUrlState } from '../../src/core/url_state.ts';
import { AppState } from '../../src/state/app.svelte.ts';
import { EnvLibrary } from '../../src/state/envs.svelte.ts';
import { HandRace } from '../../src/state/hand_race.svelte.ts';
import { LAB_DEFAULTS, LabState } from '../../src/state/lab.svelte.ts';
import { ModelsState } from '../../src/state/models.svelte.ts';
import { RunState } from '../../src/state/run.svelte.ts';
import { TrainingState } from '../../src/state/training.svelte.ts';
import { changedLabFields, Wiring, type HashPort } from '../../src/state/wiring.svelte.ts';

// every parse of a link, by any module, is counted (the real parser answers)
vi.mock('../../src/core/url_state.ts', { spy: true });
const parses = () => vi.mocked(parseUrlState).mock.calls.length;

/** The address bar: what replace wrote, and a navigation the test makes. */
function addressBar(hash: string) {
  const bar = {
    hash,
    writes: [] as string[],
    navigate: (_hash: string) => undefined as void,
  };
  const port: HashPort = {
    read: () => bar.hash,
    replace: (text) => {
      bar.writes.push(text);
      bar.hash = text ? `#${text}` : '';
    },
    base: () => 'https://example.org/app/',
    listen: (on) => {
      bar.navigate = (h) => {
        bar.hash = h;
        on(h);
      };
      return () => (bar.navigate = () => undefined);
    },
  };
  return { bar, port };
}

function panels() {
  const app = new AppState(new MemoryStore());
  const lab = new LabState();
  const p = {
    app,
    lab,
    race: new HandRace(lab, app.store),
    run: new RunState(app.store),
    training: new TrainingState(app.store),
    models: new ModelsState(app.store, () => null),
    // a double: corpus.svelte.ts reads Vite's import.meta.env, which Node's type check does not know
    corpus: { load: async () => undefined },
    library: new EnvLibrary(app.store),
  };
  const spies = {
    app: vi.spyOn(p.app, 'applyLink'),
    lab: vi.spyOn(p.lab, 'applyLink'),
    race: vi.spyOn(p.race, 'loadRecorded'),
    open: vi.spyOn(p.run.review, 'openRunUrl').mockResolvedValue(true),
  };
  return { p, spies };
}

describe('the link, parsed once and written once', () => {
  it('hands each state its part of the link once, and the states write one hash', async () => {
    const { p, spies } = panels();
    const { bar, port } = addressBar(
      '#panel=lab&seed=5&lab.seed=3&lab.K=2&lab.hand=ab.cd&lab.who=Ann&lab.N=zz&theme=neon&run=runs/a.json',
    );
    const wiring = new Wiring(p, port);
    vi.mocked(parseUrlState).mockClear();
    await wiring.start();
    expect(parses()).toBe(1);
    // the app: its fields over the saved settings, its problems as notices (not the Lab's)
    expect(spies.app).toHaveBeenCalledTimes(1);
    expect(spies.app.mock.calls[0]![1]).toEqual([
      'ignored from the link: theme must be one of system, light, dark; got "neon"',
    ]);
    expect(p.app.config.seed).toBe(5);
    // the Lab: its settings, and its own problem as a warning
    expect(spies.lab).toHaveBeenCalledTimes(1);
    expect(spies.lab.mock.calls[0]![0]).toEqual({ seed: 3, levels: 2, curriculum: 'ab.cd', who: 'Ann' });
    expect(p.lab.warnings).toEqual(['ignored from the link: lab.N must be a number; got "zz"']);
    // the race: the curriculum the link brought, to replay
    expect(spies.race).toHaveBeenCalledTimes(1);
    expect(spies.race).toHaveBeenCalledWith('ab.cd', 2);
    expect(p.race.recorded).toEqual(['ab', 'cd']);
    // the run's review: the file, resolved against the page's address; the run panel opens on it
    expect(spies.open).toHaveBeenCalledTimes(1);
    expect(spies.open).toHaveBeenCalledWith('https://example.org/app/runs/a.json');
    expect([p.app.panel, wiring.linkedRun]).toEqual(['run', 'runs/a.json']);

    // one hash from every state (the effect's body), written only when its text changes
    wiring.writeHash();
    expect(bar.writes).toEqual(['seed=5&run=runs%2Fa.json']); // the run panel is the default
    wiring.writeHash();
    expect(bar.writes).toHaveLength(1);
    p.app.panel = 'lab';
    p.lab.settings.plays = 4;
    wiring.writeHash();
    expect(bar.writes).toHaveLength(2);
    expect(bar.writes[1]).toBe(
      'panel=lab&seed=5&run=runs%2Fa.json&lab.seed=3&lab.K=2&lab.N=4&lab.hand=ab.cd&lab.who=Ann',
    );
    // nothing was parsed to write it
    expect(parses()).toBe(1);
    wiring.stop();
  });

  it('writes nothing before the saved work has loaded', () => {
    const { p } = panels();
    const { bar, port } = addressBar('#seed=4');
    const wiring = new Wiring(p, port);
    p.app.panel = 'memory';
    wiring.writeHash();
    expect(bar.writes).toEqual([]);
  });

  it('a hashchange hands over only what it changes', async () => {
    const { p, spies } = panels();
    const { bar, port } = addressBar('#panel=lab&lab.seed=3&lab.K=2&run=https://example.org/r.json');
    const wiring = new Wiring(p, port);
    await wiring.start();
    for (const s of Object.values(spies)) s.mockClear();
    vi.mocked(parseUrlState).mockClear();
    const settings = p.lab.settings;

    // the same Lab settings, a new theme: the Lab's settings stay the same object, the run file is not reopened
    bar.navigate('#panel=lab&lab.seed=3&lab.K=2&theme=dark&run=https://example.org/r.json');
    expect(parses()).toBe(1);
    expect(p.app.theme).toBe('dark');
    expect(spies.lab.mock.calls).toEqual([[{}, []]]);
    expect(p.lab.settings).toBe(settings);
    expect(spies.race).not.toHaveBeenCalled();
    expect(spies.open).not.toHaveBeenCalled();

    // one Lab setting changed: only it is handed over; a new run file is opened
    bar.navigate('#panel=lab&lab.seed=3&lab.K=4&run=https://example.org/s.json');
    expect(spies.lab.mock.calls[1]![0]).toEqual({ levels: 4 });
    expect(p.lab.settings).toEqual({ ...LAB_DEFAULTS, seed: 3, levels: 4 });
    expect(spies.race).not.toHaveBeenCalled();
    expect(spies.open).toHaveBeenCalledTimes(1);
    expect(spies.open).toHaveBeenCalledWith('https://example.org/s.json');

    // a curriculum arrives: the race takes it
    bar.navigate('#lab.K=4&lab.hand=abcd');
    expect(spies.race).toHaveBeenCalledWith('abcd', 4);
    expect(p.race.recorded).toEqual(['abcd']);
    expect(parses()).toBe(3);
    wiring.stop();
    // stopped: navigations are no longer followed
    bar.navigate('#panel=settings');
    expect(parses()).toBe(3);
  });

  it('a run link that is no http(s) address is a message, not a download', async () => {
    const { p, spies } = panels();
    const { port } = addressBar('#run=javascript:alert(1)');
    const wiring = new Wiring(p, port);
    await wiring.start();
    expect(spies.open).not.toHaveBeenCalled();
    expect(p.run.review.openError).toBe('A run link must be an http(s) address; "javascript:" links are not opened.');
    expect(wiring.linkedRun).toBeNull();
  });

  it('keeps the Lab settings a link leaves out and those it already has', () => {
    expect(changedLabFields(LAB_DEFAULTS, { seed: LAB_DEFAULTS.seed, levels: 5 })).toEqual({ levels: 5 });
    expect(changedLabFields(LAB_DEFAULTS, {})).toEqual({});
  });
});

describe('the wiring between panels', () => {
  it('the run hands each cycle to training only while "train after every cycle" is on with a checkpoint', () => {
    const { p } = panels();
    const wiring = new Wiring(p, addressBar('').port);
    wiring.handOffCycles();
    expect(p.run.afterCycle).toBeNull();
    p.training.autoTrain = true;
    wiring.handOffCycles();
    expect(p.run.afterCycle).toBeNull(); // no checkpoint loaded
    p.training.summary = { name: 'tiny' } as NonNullable<TrainingState['summary']>;
    const trained = vi.spyOn(p.training, 'afterCycle').mockResolvedValue();
    wiring.handOffCycles();
    const cycle = { cycle: 0 } as Parameters<NonNullable<RunState['afterCycle']>>[0];
    void p.run.afterCycle!(cycle);
    expect(trained).toHaveBeenCalledWith(cycle);
    p.training.autoTrain = false;
    wiring.handOffCycles();
    expect(p.run.afterCycle).toBeNull();
  });

  it("the loaded checkpoint is the Models panel's local model; play-it-yourself selects the environment", () => {
    const { p } = panels();
    const wiring = new Wiring(p, addressBar('').port);
    const local = { backend: 'local', model: 'tiny' } as ChatModel;
    p.training.chatModel = local;
    wiring.handOffModel();
    expect(p.models.local).toBe(local);
    wiring.playFromRun('env-1', 7);
    expect([p.run.playRequest, p.library.selectedId, p.app.panel]).toEqual([
      { id: 'env-1', seed: 7 },
      'env-1',
      'environments',
    ]);
  });
});
