// Every engine kernel, in every variant its #if flags select, binds at most 8 storage buffers: the
// default maxStorageBuffersPerShaderStage, which is all some adapters offer (small GPUs).
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { preprocessWgsl } from '../../src/engine/kernels/wgsl_preprocess.ts';
import { WGSL_SNIPPETS } from '../../src/engine/kernels/wgsl_snippets.ts';

const DIR = join(import.meta.dirname, '../../src/engine/kernels');
const DEFAULT_LIMIT = 8;

/** The #if flags of `code` and of the snippets it includes, transitively. */
function flagsOf(code: string, seen = new Set<string>()): Set<string> {
  const flags = new Set([...code.matchAll(/\/\/\s*#if\s+(\w+)/g)].map((m) => m[1]!));
  for (const m of code.matchAll(/\/\/\s*#include\s+"([\w.-]+)"/g)) {
    if (seen.has(m[1]!)) continue;
    seen.add(m[1]!);
    for (const f of flagsOf(WGSL_SNIPPETS[m[1]!] ?? '', seen)) flags.add(f);
  }
  return flags;
}

/** The largest number of storage bindings over every combination of the kernel's flags. */
function maxStorageBindings(code: string, label: string): { count: number; flags: string[] } {
  const names = [...flagsOf(code)];
  let best = { count: 0, flags: [] as string[] };
  for (let mask = 0; mask < 1 << names.length; mask++) {
    const flags = Object.fromEntries(names.map((n, i) => [n, ((mask >> i) & 1) === 1]));
    const src = preprocessWgsl(code, flags, label);
    const count = new Set([...src.matchAll(/@binding\((\d+)\)\s*var<storage/g)].map((m) => m[1])).size;
    if (count > best.count) best = { count, flags: names.filter((_, i) => (mask >> i) & 1) };
  }
  return best;
}

describe('kernel storage bindings', () => {
  const kernels = readdirSync(DIR).filter((f) => f.endsWith('.wgsl'));

  it('finds the kernels', () => {
    expect(kernels.length).toBeGreaterThan(20);
  });

  it.each(kernels)('%s binds at most 8 storage buffers in every variant', (file) => {
    const { count, flags } = maxStorageBindings(readFileSync(join(DIR, file), 'utf8'), file);
    expect(count, `${file} with flags [${flags.join(', ')}]`).toBeLessThanOrEqual(DEFAULT_LIMIT);
  });
});
