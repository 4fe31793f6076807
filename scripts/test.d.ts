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

export const STEPS: { name: string; cmd: [string, string[]]; report?: string }[];

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
