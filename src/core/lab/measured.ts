/**
 * The Lab's pre-registered comparisons as measured on their held-out seeds: the data is
 * measured.json (the runs each command printed, never edited by hand); this gives it its types.
 */
import data from './measured.json' with { type: 'json' };
import type { SeedRun } from './compare.ts';
import type { SpaceName } from './spaces.ts';

export interface MeasuredComparison {
  space: SpaceName;
  /** The command that printed the runs (run in parts and merged with --combine). */
  command: string;
  seeds: string;
  cycles: number;
  /** Seeds the dead-seed screen left out (pre-registration 3 on). */
  screenedOut?: number[];
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
  /** Pre-registration 4: the climb, every round-4 arm, held-out seeds 71–80 (absent until it is run). */
  prereg4?: MeasuredComparison;
};
