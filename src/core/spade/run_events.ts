/**
 * The loop's events and the one reducer that reads them. The loop emits events as a
 * run happens; `applyEvent` folds them into a `RunView` (the current cycle's tasks —
 * document, designer stream, checks, hint, plays — plus metrics and the archive). The
 * app's rune class, the CLI and the tests all read runs through this reducer, so they
 * see a run the same way. Pure: the view is a plain object (or a Svelte $state proxy).
 */
import type { CheckReport } from '../env/checker.ts';
import type { ChatMessage } from '../llm/chat_model.ts';
import type { Episode, Turn } from './agent.ts';
import type { ArchiveRecord, MetricsRecord, RolloutRecord } from './run_store.ts';

export type LoopEvent =
  | { type: 'cycle_start'; cycle: number; skills: string[] }
  | { type: 'document'; cycle: number; index: number; skill: string; source: string; excerpt: string }
  | { type: 'designer_token'; cycle: number; index: number; attempt: number; delta: string }
  | {
      type: 'designer_output';
      cycle: number;
      index: number;
      attempt: number;
      text: string;
      code: string | null;
      messages: ChatMessage[];
    }
  | {
      type: 'checks';
      cycle: number;
      index: number;
      attempt: number;
      ok: boolean;
      failures: string[];
      /** Strict-level findings that do not fail the design under `checks: paper`. */
      soft: string[];
      report: CheckReport | null;
    }
  | { type: 'hint'; cycle: number; index: number; hint: string }
  | { type: 'rollout_turn'; cycle: number; index: number; play: number; hinted: boolean; turn: number; data: Turn }
  | {
      type: 'rollout_end';
      cycle: number;
      index: number;
      play: number;
      hinted: boolean;
      return: number;
      end: Episode['end'];
    }
  | { type: 'env_scored'; cycle: number; index: number; record: ArchiveRecord }
  /** A model call or the checker failed: this task ends (recorded), the run goes on. */
  | { type: 'task_error'; cycle: number; index: number; phase: string; message: string }
  | { type: 'memory'; cycle: number; size: number; added: string[] }
  | { type: 'cycle_end'; cycle: number; metrics: MetricsRecord; archive: ArchiveRecord[]; rollouts: RolloutRecord[] }
  | { type: 'error'; cycle: number; index?: number; message: string }
  | { type: 'paused' | 'resumed' | 'stopped' | 'done'; cycle: number };

interface PlayView {
  play: number;
  hinted: boolean;
  turns: { action: string; observation: string; reward: number }[];
  result: number | null;
  end: string | null;
}

export interface TaskView {
  index: number;
  skill: string;
  source: string | null;
  excerpt: string | null;
  designer: string;
  attempts: { ok: boolean; failures: string[]; soft: string[] }[];
  hint: string | null;
  plays: PlayView[];
  record: ArchiveRecord | null;
  /** Set when a model call or the checker failed and the task ended early. */
  error: string | null;
}

/** What a reader of a run sees: the live cycle, and everything finished before it. */
export interface RunView {
  status: 'idle' | 'running' | 'paused' | 'done' | 'stopped' | 'error';
  error: string | null;
  cycle: number;
  tasks: TaskView[];
  metrics: MetricsRecord[];
  archive: ArchiveRecord[];
}

/** Streams and transcripts are cut for display; the run store keeps them whole. */
const MAX_STREAM_CHARS = 20_000;
const MAX_TURN_CHARS = 2_000;

export function emptyRunView(): RunView {
  return { status: 'idle', error: null, cycle: 0, tasks: [], metrics: [], archive: [] };
}

function emptyTask(index: number, skill: string): TaskView {
  return {
    index,
    skill,
    source: null,
    excerpt: null,
    designer: '',
    attempts: [],
    hint: null,
    plays: [],
    record: null,
    error: null,
  };
}

/** The task's view of one play, created on its first event. */
function playOf(t: TaskView, play: number, hinted: boolean): PlayView {
  let p = t.plays.find((x) => x.play === play && x.hinted === hinted);
  if (!p) {
    t.plays.push({ play, hinted, turns: [], result: null, end: null });
    p = t.plays[t.plays.length - 1]!; // read back: in a reactive view the array holds a proxy of it
  }
  return p;
}

/** Fold one event into the view (in place, so a reactive proxy sees each field change). */
export function applyEvent(view: RunView, e: LoopEvent): void {
  const task = (i: number) => view.tasks.find((t) => t.index === i);
  switch (e.type) {
    case 'cycle_start':
      view.cycle = e.cycle;
      view.tasks = e.skills.map((skill, index) => emptyTask(index, skill));
      break;
    case 'document': {
      const t = task(e.index);
      if (t) Object.assign(t, { source: e.source, excerpt: e.excerpt });
      break;
    }
    case 'designer_token': {
      const t = task(e.index);
      if (t && t.designer.length < MAX_STREAM_CHARS) t.designer += e.delta;
      break;
    }
    case 'designer_output': {
      const t = task(e.index);
      if (t) t.designer = e.text.slice(0, MAX_STREAM_CHARS);
      break;
    }
    case 'checks': {
      const t = task(e.index);
      if (t) t.attempts.push({ ok: e.ok, failures: e.failures, soft: e.soft });
      break;
    }
    case 'hint': {
      const t = task(e.index);
      if (t) t.hint = e.hint;
      break;
    }
    case 'rollout_turn': {
      const t = task(e.index);
      if (!t) break;
      playOf(t, e.play, e.hinted).turns.push({
        action: e.data.action.slice(0, MAX_TURN_CHARS),
        observation: e.data.observation.slice(0, MAX_TURN_CHARS),
        reward: e.data.reward,
      });
      break;
    }
    case 'rollout_end': {
      const t = task(e.index);
      if (t) Object.assign(playOf(t, e.play, e.hinted), { result: e.return, end: e.end });
      break;
    }
    case 'env_scored': {
      const t = task(e.index);
      if (t) t.record = e.record;
      break;
    }
    case 'task_error': {
      const t = task(e.index);
      if (t) t.error = `${e.phase}: ${e.message}`;
      break;
    }
    case 'cycle_end':
      view.metrics = [...view.metrics, e.metrics];
      view.archive = [...view.archive, ...e.archive];
      break;
    case 'error':
      view.error = e.message;
      break;
    case 'paused':
      view.status = 'paused';
      break;
    case 'resumed':
      view.status = 'running';
      break;
    case 'stopped':
      view.status = 'stopped';
      break;
    case 'done':
      view.status = 'done';
      break;
    case 'memory':
      break;
  }
}
