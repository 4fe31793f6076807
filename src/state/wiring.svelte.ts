/**
 * The app's one owner of the URL hash and of the wiring between panels, as a rune class.
 *
 * The hash is parsed once (core/url_state.ts parseUrlState) when the app starts and once on each
 * hashchange, and each state is handed its part of that one parse: the app its panel, theme,
 * config and shared env set (AppState.applyLink, after its saved settings load), the Lab the
 * `lab.*` settings that differ from its own (LabState.applyLink, at once), the race a curriculum
 * the link brought (HandRace.loadRecorded), the run a `#run=URL` file to review. The hash is
 * written once, from every state together (formatUrlState), with history.replaceState and only
 * when its text changes — the TensorFlow Playground's habit: the state is the source, the link
 * derives from it.
 *
 * The wiring between panels lives here too: the run hands each cycle to training while "train
 * after every cycle" is on, the loaded checkpoint is the Models panel's `local` model, the run's
 * environments and "play it yourself" (from a run or the Lab) reach the Environments panel, and
 * the settings and model choices persist after the first load. ui/App.svelte only renders and calls
 * start/stop. Tests drive it in Node through a HashPort double and call the effects' bodies
 * (writeHash, handOffCycles, …) directly: outside the browser, runes compile without effects.
 */
import type { EnvRecord } from '../core/env/envset.ts';
import { serializeError } from '../core/errors.ts';
import type { LabChoices } from '../core/lab/settings.ts';
import { runEnvRecords } from '../core/spade/run_envs.ts';
import { formatUrlState, parseUrlState, type LinkProblem, type Panel, type UrlFields } from '../core/url_state.ts';
import type { AppState } from './app.svelte.ts';
import type { EnvLibrary } from './envs.svelte.ts';
import type { HandRace } from './hand_race.svelte.ts';
import { LAB_DEFAULTS, type LabState } from './lab.svelte.ts';
import type { ModelsState } from './models.svelte.ts';
import type { RunState } from './run.svelte.ts';
import type { TrainingState } from './training.svelte.ts';

/** The states the wiring connects (ui/App.svelte makes one of each). */
export interface Panels {
  app: AppState;
  lab: LabState;
  race: HandRace;
  run: RunState;
  training: TrainingState;
  models: ModelsState;
  /** The corpus panel (state/corpus.svelte.ts): only its saved state's load is wired. */
  corpus: { load(): Promise<void> };
  library: EnvLibrary;
}

/** Where the hash lives: the page's location and history (browserHash), or a test's double. */
export interface HashPort {
  /** The hash now, with or without its "#". */
  read(): string;
  /** Put `text` (no "#"; '' for none) in the address bar without a history entry. */
  replace(text: string): void;
  /** The page's address, to resolve a relative `#run=` link against. */
  base(): string;
  /** Call `on` with each hash navigated to; returns the unsubscribe. */
  listen(on: (hash: string) => void): () => void;
}

/** The browser's location and history. */
const browserHash: HashPort = {
  read: () => location.hash,
  replace: (text) =>
    history.replaceState(history.state, '', `${location.pathname}${location.search}${text ? `#${text}` : ''}`),
  base: () => location.href,
  listen(on) {
    // the hash navigated to, from the event: by the time this runs, the app may already have
    // rewritten location.hash from its state (replaceState), which would lose the navigation
    const handler = (e: HashChangeEvent) => on(new URL(e.newURL).hash);
    addEventListener('hashchange', handler);
    return () => removeEventListener('hashchange', handler);
  },
};

/** A link's problems for one reader: the Lab shows its `lab.*` keys', the app the rest. */
const messagesFor = (problems: readonly LinkProblem[], scope: LinkProblem['scope']) =>
  problems.filter((p) => p.scope === scope).map((p) => p.message);

/** The link's Lab settings that differ from `current`: what a link changes (the rest is already so). */
export function changedLabFields(current: LabChoices, fields: Partial<LabChoices>): Partial<LabChoices> {
  const key = Object.keys(fields) as (keyof LabChoices)[];
  return Object.fromEntries(key.filter((k) => fields[k] !== current[k]).map((k) => [k, fields[k]]));
}

/** A `#run=` link as an address the review may fetch, or why it is not one. */
function runLinkUrl(link: string, base: string): { ok: true; href: string } | { ok: false; message: string } {
  let url: URL;
  try {
    url = new URL(link, base);
  } catch {
    return { ok: false, message: `The run link "${link.slice(0, 80)}" is not a URL.` };
  }
  if (!['http:', 'https:', 'data:', 'blob:'].includes(url.protocol))
    return { ok: false, message: `A run link must be an http(s) address; "${url.protocol}" links are not opened.` };
  return { ok: true, href: url.href };
}

export class Wiring {
  /** The saved work has loaded: from then on the hash is written and changes are saved. */
  loaded = $state(false);
  /** A run file linked with `#run=URL`: kept in the hash while it is on screen, so a reload reopens it. */
  linkedRun = $state<string | null>(null);
  /** The latest parse of the hash (start's, then each hashchange's): the app takes its part after loading. */
  private link: { fields: UrlFields; problems: LinkProblem[] } | null = null;
  private stops: (() => void)[] = [];

  constructor(
    private readonly p: Panels,
    private readonly port: HashPort = browserHash,
  ) {}

  /**
   * Read the hash once and hand each state its part (the Lab's at once, the app's after its saved
   * settings load), follow hashchanges, and keep the hash and the panels' hand-offs up to date; the
   * promise settles when the saved work has loaded and a linked run file has been opened.
   */
  async start(): Promise<void> {
    this.stops.push(
      $effect.root(() => {
        $effect(() => this.writeHash());
        $effect(() => this.handOffModel());
        $effect(() => this.handOffCycles());
        $effect(() => this.listRunEnvs());
        $effect(() => this.forgetClosedLink());
        $effect(() => this.persistSettings());
        $effect(() => this.persistModels());
      }),
      this.port.listen((hash) => this.navigated(hash)),
    );
    this.link = parseUrlState(this.port.read());
    this.handToLab(this.link);
    await this.load();
  }

  /** Stop following the hash and the states (the app is gone). */
  stop(): void {
    for (const s of this.stops.splice(0)) s();
  }

  /** The saved work, then the app's part of the latest hash, then a linked run file. */
  private async load(): Promise<void> {
    const { app, library, models, corpus, run, race } = this.p;
    await app.load();
    // the latest parse: a hashchange while the saved settings loaded replaced start's
    const link = this.link!;
    app.applyLink(link.fields, messagesFor(link.problems, 'app'));
    // each panel's saved state loads on its own: one that fails says why and the others still load
    const loads = await Promise.allSettled([
      library.load(),
      models.load(),
      corpus.load(),
      run.load(),
      race.loadBoard(),
    ]);
    for (const r of loads)
      if (r.status === 'rejected') app.notices.push(`Could not load saved work: ${serializeError(r.reason).message}`);
    library.openShared(app.sharedSet);
    this.loaded = true;
    const l = this.link!.fields.run;
    if (l && l !== this.linkedRun) await this.openLinked(l);
  }

  /** A hash navigated to (the address bar, a link on the page): each state takes what it changes. */
  navigated(hash: string): void {
    const { app, library } = this.p;
    this.link = parseUrlState(hash);
    const { fields, problems } = this.link;
    app.applyLink(fields, messagesFor(problems, 'app'));
    this.handToLab(this.link);
    library.openShared(app.sharedSet);
    if (fields.run && fields.run !== this.linkedRun) void this.openLinked(fields.run);
  }

  /** The Lab's settings a link changes, and its problems as the Lab's warnings; a curriculum among them goes to the race. */
  private handToLab({ fields, problems }: { fields: UrlFields; problems: LinkProblem[] }): void {
    const { lab, race } = this.p;
    const changed = changedLabFields(lab.settings, fields.lab);
    lab.applyLink(changed, messagesFor(problems, 'lab'));
    if (Object.keys(changed).length && lab.settings.curriculum)
      race.loadRecorded(lab.settings.curriculum, lab.settings.levels);
  }

  /** The link every state describes: the Lab's settings ride along while the Lab is open, so its link reproduces the run. */
  linkText(): string {
    const { app, lab } = this.p;
    const lab_ = app.panel === 'lab' ? lab.linkChoices() : undefined;
    return formatUrlState({ ...app.urlState(), run: this.linkedRun, lab: lab_ }, LAB_DEFAULTS);
  }

  /** Write the hash (once loaded), only when its text changed. */
  writeHash(): void {
    const text = this.linkText();
    if (!this.loaded) return;
    const now = this.port.read().replace(/^#/, '');
    if (now !== text) this.port.replace(text);
  }

  /** The checkpoint the Training panel loaded is the Models panel's `local` model. */
  handOffModel(): void {
    this.p.models.local = this.p.training.chatModel;
  }

  /**
   * The run gives each cycle to training while "train after every cycle" is on and a checkpoint is
   * loaded (RunState.afterCycle; null otherwise).
   */
  handOffCycles(): void {
    const { run, training } = this.p;
    run.afterCycle = training.autoTrain && training.summary ? (d) => training.afterCycle(d) : null;
  }

  /** The run's environments are listed in the Environments panel. */
  listRunEnvs(): void {
    const { run, library } = this.p;
    library.runEnvs = runEnvRecords(run.runId ?? 'run', run.archive);
  }

  /** A linked run file closed: its link leaves the hash (one that failed to open stays, to be corrected or retried). */
  forgetClosedLink(): void {
    if (!this.p.run.review.opened) this.linkedRun = null;
  }

  /** Save the settings and the theme whenever they change, once the saved ones have loaded. */
  persistSettings(): void {
    const { app } = this.p;
    JSON.stringify(app.config);
    void app.theme;
    if (this.loaded) app.save().catch((err: Error) => app.notices.push(err.message));
  }

  /** Save the model choices whenever they change, once the saved ones have loaded. */
  persistModels(): void {
    const { app, models } = this.p;
    JSON.stringify([models.roles, models.openai, models.customModels]);
    void models.webllmId;
    void models.vramBudgetMB;
    if (this.loaded) models.save().catch((err: Error) => app.notices.push(err.message));
  }

  /** Open `#run=URL` (http(s), data: or blob:) in the run's review: a bad link becomes a message. */
  async openLinked(link: string): Promise<void> {
    const { app, run } = this.p;
    const url = runLinkUrl(link, this.port.base());
    if (!url.ok) {
      run.review.openError = url.message;
      return;
    }
    this.linkedRun = link;
    app.panel = 'run';
    // a link that fails stays in the address bar (beside the error), to be corrected or retried
    await run.review.openRunUrl(url.href);
  }

  /** Open a panel. */
  go(panel: Panel): void {
    this.p.app.panel = panel;
  }

  /** "Play it yourself": select the run's environment and its seed; it runs only when the user presses Play. */
  playFromRun(id: string, seed: number): void {
    const { run, library } = this.p;
    run.playRequest = { id, seed };
    library.selectedId = id;
    this.go('environments');
  }

  /** The Lab's "play this level yourself": add the level to the Environments panel, select it; it runs only on Play. */
  playFromLab(record: EnvRecord, seed: number): void {
    const { library } = this.p;
    library.labEnvs = [record, ...library.labEnvs.filter((e) => e.id !== record.id)];
    this.playFromRun(record.id, seed);
  }
}
