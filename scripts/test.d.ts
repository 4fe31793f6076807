// Types of scripts/test.js's exports (the `npm test` runner), for tests/unit/test_runner.test.ts.

export interface VitestJsonReport {
  numPassedTests?: number;
  numFailedTests?: number;
  numPendingTests?: number;
  numTodoTests?: number;
  testResults?: { name: string; status: string; assertionResults?: { status: string }[] }[];
}

export interface TierResult {
  name: string;
  /** Exit status; null when the tier was killed by a signal. */
  status: number | null;
  secs: number;
  report: VitestJsonReport | null;
}

export interface Step {
  name: string;
  cmd: [string, string[]];
  report?: string;
  /** Starts together with the tier before it in STEPS (when both are planned). */
  withPrevious?: boolean;
}

export const STEPS: Step[];

/** The planned tiers grouped into runs, in order: the tiers of one run start together. */
export function runsOf(planned: Step[]): Step[][];

export function countReport(report: VitestJsonReport): {
  passed: number;
  failed: number;
  skipped: number;
  brokenFiles: string[];
};

export function tallyTiers(
  results: TierResult[],
  planned?: string[],
): {
  passed: number;
  failed: number;
  skipped: number;
  rows: string[];
  notRun: string[];
  closing: string;
  exitCode: number;
};
