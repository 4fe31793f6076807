// Types of scripts/mutants.js's exports (the `npm run mutants` runner) and of its list
// (scripts/mutants.list.js), for tests/unit/mutants_runner.test.ts.

export interface Mutant {
  id: string;
  file: string;
  find: string;
  replace: string;
  test: string | string[];
  why: string;
}

export function testsOf(m: Mutant): string[];

export function projectOf(file: string): 'unit' | 'gpu' | 'e2e';

export function applyMutant(source: string, m: Mutant): { ok: true; text: string } | { ok: false; reason: string };

export function listProblems(mutants: Mutant[], root?: string): string[];
