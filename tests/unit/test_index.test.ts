// The index from module to tests in docs/testing.md ("Tests by module", scripts/test_index.js): the
// committed section is what the generator writes for the tree as it is (run `node
// scripts/test_index.js` after adding a test or moving a module), every module under src/ and
// workers/ is in it, the hand-kept e2e map names modules and e2e tests that exist and only modules no
// test reaches by imports, and a stale copy is found (`--check` exits 1 on it).
//   npx vitest run --project unit tests/unit/test_index.test.ts
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  E2E,
  END,
  START,
  graphOf,
  indexOf,
  problemsOf,
  render,
  splice,
  staleLine,
  type Graph,
} from '../../scripts/test_index.js';

const ROOT = resolve(import.meta.dirname, '../..');
const DOC = join(ROOT, 'docs/testing.md');

function files(dir: string, out: string[] = []): string[] {
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) files(p, out);
    else if (/\.(ts|js|svelte)$/.test(name) && !name.endsWith('.d.ts')) out.push(relative(ROOT, p));
  }
  return out;
}

let graph: Graph;
beforeAll(async () => {
  graph = await graphOf();
}, 120_000);

describe('the test index', () => {
  it('is current in docs/testing.md', () => {
    const doc = readFileSync(DOC, 'utf8');
    expect(doc).toContain(START);
    expect(splice(doc, render(indexOf(graph))), 'stale: run node scripts/test_index.js').toBe(doc);
  });

  it('lists every module under src/ and workers/, each once', () => {
    const onDisk = [...files(join(ROOT, 'src')), ...files(join(ROOT, 'workers'))].sort();
    expect(graph.modules).toEqual(onDisk);
    const entries = indexOf(graph);
    expect(entries.map((e) => e.module)).toEqual(onDisk);
    expect(entries.find((e) => e.module === 'src/core/rng.ts')!.kind).toBe('tests');
  });

  it('has an e2e map naming existing modules and e2e tests, only for modules no test reaches', () => {
    expect(problemsOf(graph)).toEqual([]);
    expect(Object.keys(E2E).length).toBeGreaterThan(10);
    for (const e of indexOf(graph).filter((x) => x.kind === 'e2e'))
      for (const f of e.files) expect(f, e.module).toMatch(/^tests\/e2e\/[a-z_]+\.test\.ts$/);
    // the check can fail: a module that is not there, one tests reach, a test that is not there
    const bad = problemsOf(graph, {
      'src/ui/Nowhere.svelte': [['shell.test.ts'], 'x'],
      'src/core/rng.ts': [['no_such.test.ts'], 'y'],
    });
    expect(bad).toEqual([
      'E2E names src/ui/Nowhere.svelte, which is not a module under src/ or workers/',
      'E2E names src/core/rng.ts, which tests reach by imports: drop it from the map',
      'E2E names tests/e2e/no_such.test.ts for src/core/rng.ts: no such test',
    ]);
  });

  it('finds the first stale line of a copy (what --check reports, exiting 1)', () => {
    const doc = splice(readFileSync(DOC, 'utf8'), render(indexOf(graph)));
    const line = doc.split('\n').findIndex((l) => l.startsWith('- `src/core/rng.ts`'));
    expect(line).toBeGreaterThan(0);
    expect(staleLine(doc, doc)).toBe(0);
    expect(staleLine(doc.replace(/^- `src\/core\/rng\.ts`: .*\n/m, ''), doc)).toBe(line + 1);
    expect(staleLine(doc.replace(/\n$/, '\n\n'), doc)).toBeGreaterThan(line);
    // a section without its markers is refused, never appended
    expect(() => splice(doc.replace(END, ''), render(indexOf(graph)))).toThrow(/no test index section/);
  });
});
