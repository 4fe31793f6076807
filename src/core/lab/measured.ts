/**
 * The Lab's pre-registered comparisons as measured on their held-out seeds: the data is
 * measured.json (the runs each command printed, never edited by hand); this gives it its types.
 * Pre-registration 4's 400-cycle runs are a file of their own, measured_prereg4.json (written by
 * scripts/lab_measured.js; the Lab panel loads it on demand: state/lab.svelte.ts loadPrereg4).
 */
import data from './measured.json' with { type: 'json' };
import type { SeedRun } from './compare.ts';
import type { ScreenResult } from './lab.ts';
import type { SpaceName } from './spaces.ts';

export interface MeasuredComparison {
  space: SpaceName;
  /** The command that printed the runs (run in parts and merged with --combine). */
  command: string;
  seeds: string;
  cycles: number;
  /** Seeds the dead-seed screen left out (pre-registration 3 on). */
  screenedOut?: number[];
  /** Every seed's dead-seed screen (pre-registration 4 on). */
  screens?: ScreenResult[];
  /** The settings the runs were made with (pre-registration 4 on: the output's `settings` line). */
  settings?: Record<string, unknown>;
  runs: SeedRun[];
}

export const MEASURED = data as unknown as {
  about: string;
  /** Pre-registration 1: 16 cycles, held-out seeds 11–20. */
  prereg1: MeasuredComparison;
  /** Pre-registration 2: 24 cycles, held-out seeds 21–30. */
  prereg2: MeasuredComparison;
  /** Pre-registration 3: the chain space, held-out seeds 41–50 (absent until it is run). */
  prereg3?: MeasuredComparison;
};
