// Type of scripts/mutants.list.js's export, for tests/unit/mutants_runner.test.ts.
import type { Mutant } from './mutants.js';

export const MUTANTS: Mutant[];
