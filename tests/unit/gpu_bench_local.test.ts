// scripts/device/gpu_bench_local.js: the shared GPU benchmark script (../shared/tools/gpu_bench.sh), once
// rewritten for this checkout, has a harness whose every `../src/...` import names an existing file that
// exports every name it imports, and which type-checks against the engine as it is now (errors in src/ itself are
// left to the typecheck tier); a specifier that
// resolves to no file stops the rewrite with its name. Skips the shared-script checks when that file is absent.
//   npx vitest run --project unit tests/unit/gpu_bench_local.test.ts
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../..');
const SCRIPT = join(ROOT, 'scripts/device/gpu_bench_local.js');
const SHARED = resolve(ROOT, '../shared/tools/gpu_bench.sh');
const HARNESS_DIR = join(ROOT, '.gpubench');

/** Runs the script on `source` into a temporary file; its exit status, stderr and what it wrote. */
function prepare(source: string) {
  const dir = mkdtempSync(join(tmpdir(), 'spade-gpubench-'));
  const out = join(dir, 'gpu_bench.sh');
  try {
    const r = spawnSync(process.execPath, [SCRIPT, source, '--out', out], { encoding: 'utf8' });
    return { code: r.status, err: r.stderr, text: existsSync(out) ? readFileSync(out, 'utf8') : '' };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The TypeScript the script writes to .gpubench/harness.ts. */
function harnessOf(script: string): string {
  const m = /cat >"\$GB\/harness\.ts" <<'HARNESS_EOF'\n([\s\S]*?)\nHARNESS_EOF\n/.exec(script);
  if (!m) throw new Error('no HARNESS_EOF heredoc in the prepared script');
  return m[1]!;
}

/** Each relative import of `code` with the names it takes: static `import {…} from` and `const {…} = await import(…)`. */
function imports(code: string): { spec: string; names: string[] }[] {
  const out: { spec: string; names: string[] }[] = [];
  const named = (list: string) =>
    list
      .split(',')
      .map((s) => s.trim().replace(/^type\s+/, ''))
      .filter(Boolean)
      .map((s) => s.split(/\s+as\s+|\s*:\s*/)[0]!.trim());
  for (const m of code.matchAll(/^import\s+(?:type\s+)?(?:\{([^}]*)\}|\w+)\s+from\s+'(\.{1,2}\/[^']+)'/gm))
    out.push({ spec: m[2]!, names: m[1] ? named(m[1]) : [] });
  for (const m of code.matchAll(/(?:const|let)\s+\{([^}]*)\}\s*=\s*await\s+import\(\s*'(\.{1,2}\/[^']+)'\s*\)/g))
    out.push({ spec: m[2]!, names: named(m[1]!) });
  return out;
}

/** Names a module exports by declaration (`export function|class|const|interface|type …`) or list (`export {…}`). */
function exportsOf(file: string): Set<string> {
  const text = readFileSync(file, 'utf8');
  const names = new Set<string>();
  const decl =
    /^export\s+(?:declare\s+)?(?:default\s+)?(?:async\s+)?(?:abstract\s+)?(?:function\*?|class|const|let|var|interface|type|enum)\s+([A-Za-z_$][\w$]*)/gm;
  for (const m of text.matchAll(decl)) names.add(m[1]!);
  for (const m of text.matchAll(/^export\s+(?:type\s+)?\{([^}]*)\}/gm))
    for (const part of m[1]!.split(',')) {
      const name = part
        .trim()
        .replace(/^type\s+/, '')
        .split(/\s+as\s+/)
        .pop()!
        .trim();
      if (name) names.add(name);
    }
  return names;
}

/** Problems with the harness's `../src/...` imports: files that do not exist, names their module does not export. */
function importProblems(harness: string): string[] {
  const problems: string[] = [];
  for (const { spec, names } of imports(harness)) {
    if (!spec.startsWith('../src/')) continue;
    const file = resolve(HARNESS_DIR, spec);
    if (!existsSync(file)) {
      problems.push(`${spec}: no such file`);
      continue;
    }
    const exported = exportsOf(file);
    for (const n of names) if (!exported.has(n)) problems.push(`${spec}: no export ${n}`);
  }
  return problems;
}

describe('gpu_bench_local.js', () => {
  it('fails naming the specifier when a harness import resolves to no file, and writes nothing', () => {
    const dir = mkdtempSync(join(tmpdir(), 'spade-gpubench-src-'));
    const source = join(dir, 'gpu_bench.sh');
    writeFileSync(
      source,
      [
        '#!/usr/bin/env bash',
        `cat >"$GB/harness.ts" <<'HARNESS_EOF'`,
        "import { Engine } from '../src/engine/runtime.ts';",
        "import { gone } from '../src/engine/no_such_room/gone.ts';",
        'HARNESS_EOF',
        '',
      ].join('\n'),
    );
    const r = prepare(source);
    rmSync(dir, { recursive: true, force: true });
    expect(r.code).toBe(1);
    expect(r.err).toContain('../src/engine/no_such_room/gone.ts');
    expect(r.err).not.toContain('runtime.ts');
    expect(r.text).toBe('');
  });

  it('reports a named import that its module does not export', () => {
    const harness = [
      "import { benchFmaPeak, benchMatmulRenamed } from '../src/engine/bench/kernels.ts';",
      "import { type Ops, GpuOps as G } from '../src/engine/ops/ops.ts';",
      "const { parseArgs } = await import('../src/cli/args.ts');",
    ].join('\n');
    expect(importProblems(harness)).toEqual(['../src/engine/bench/kernels.ts: no export benchMatmulRenamed']);
  });

  const shared = existsSync(SHARED);
  describe.skipIf(!shared)(shared ? `on ${SHARED}` : `skipped: ${SHARED} is absent (no shared checkout)`, () => {
    it('rewrites the old flat engine paths so every ../src import exists and exports what the harness takes', () => {
      const r = prepare(SHARED);
      expect(r.err).toBe('');
      expect(r.code).toBe(0);
      const harness = harnessOf(r.text);
      const srcImports = imports(harness).filter((i) => i.spec.startsWith('../src/'));
      expect(srcImports.length).toBeGreaterThan(20);
      expect(importProblems(harness)).toEqual([]);
      // Outside the harness, the script is the shared one, line for line, after the one-line note.
      const original = readFileSync(SHARED, 'utf8');
      expect(r.text.replace(harness, '').split('\n').slice(2)).toEqual(
        original.replace(harnessOf(original), '').split('\n').slice(1),
      );
    });

    it('type-checks the rewritten harness against the engine', { timeout: 240_000 }, () => {
      const r = prepare(SHARED);
      expect(r.code).toBe(0);
      // A folder directly under the root, so the harness's `../src/...` specifiers resolve as in .gpubench/.
      const dir = mkdtempSync(join(ROOT, '.gpubench-typecheck-'));
      try {
        writeFileSync(join(dir, 'harness.ts'), harnessOf(r.text));
        writeFileSync(
          join(dir, 'tsconfig.json'),
          JSON.stringify({
            extends: '../tsconfig.node.json',
            compilerOptions: { noUnusedLocals: false, noUnusedParameters: false },
            include: ['../src/types.d.ts', 'harness.ts'],
          }),
        );
        const tsc = spawnSync(
          process.execPath,
          [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', join(dir, 'tsconfig.json')],
          { encoding: 'utf8' },
        );
        // Errors inside src/ are the typecheck tier's; the harness's own and the config's are this test's.
        const errors = (tsc.stdout + tsc.stderr).split('\n').filter((l) => /error TS\d+/.test(l));
        expect(errors.filter((l) => !l.startsWith('src/'))).toEqual([]);
        expect(tsc.status === 0 || errors.length > 0).toBe(true);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  });
});
