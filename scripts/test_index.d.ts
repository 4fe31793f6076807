// Types of scripts/test_index.js's exports, for tests/unit/test_index.test.ts.
export interface Graph {
  modules: string[];
  tests: Map<string, string[]>;
  importers: Map<string, string[]>;
}
export interface Entry {
  module: string;
  kind: 'tests' | 'through' | 'e2e' | 'none';
  files: string[];
  what?: string;
}
export type E2eMap = Record<string, [string[], string]>;

export const START: string;
export const END: string;
export const E2E: E2eMap;
export function graphOf(root?: string): Promise<Graph>;
export function indexOf(graph: Graph, e2e?: E2eMap): Entry[];
export function problemsOf(graph: Graph, e2e?: E2eMap, root?: string): string[];
export function render(entries: Entry[]): string;
export function splice(doc: string, section: string): string;
export function staleLine(doc: string, fresh: string): number;
