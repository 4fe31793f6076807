// Types of scripts/lab_measured.js's exports, for tests/unit/lab_measured.test.ts.
import type { MeasuredComparison } from '../src/core/lab/measured.ts';

/** Per pre-registration: the file the Lab panel loads, and the command its held-out parts were run with. */
export const PREREGS: Readonly<Record<4 | 5, { out: string; command: string }>>;
export function measuredEntry(text: string, command?: string): MeasuredComparison;
