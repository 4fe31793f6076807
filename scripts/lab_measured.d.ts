// Types of scripts/lab_measured.js's exports, for tests/unit/lab_measured.test.ts.
import type { MeasuredComparison } from '../src/core/lab/measured.ts';

export const DEFAULT_OUT: string;
export function measuredEntry(text: string, command?: string): MeasuredComparison;
