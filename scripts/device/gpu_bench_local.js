#!/usr/bin/env node
// Prepares the shared GPU benchmark script for this checkout: reads ../shared/tools/gpu_bench.sh (or
// the path given), rewrites the import specifiers of its TypeScript harness (the heredoc it writes to
// .gpubench/harness.ts) from the engine's old flat layout (src/engine/model.ts, ...) to the files the
// engine lives in now (src/engine/model/model.ts, ...), checks that every `../src/...` import of the
// harness names an existing file, and writes ./gpu_bench.sh at the repo root (untracked but not ignored,
// so it travels with a copy of the working tree). Exits 1, naming each specifier, when one does not resolve.
// See docs/benchmarks.md, "Reproducing the GPU-machine runs".
//   node scripts/device/gpu_bench_local.js [SOURCE] [--out FILE]
import { chmodSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, relative, resolve } from 'node:path';

const ROOT = resolve(dirname(new URL(import.meta.url).pathname), '../..');
// The harness file sits in ROOT/.gpubench/, so its specifiers are relative to that folder.
const HARNESS_DIR = resolve(ROOT, '.gpubench');
const OPEN = `cat >"$GB/harness.ts" <<'HARNESS_EOF'\n`;
const CLOSE = '\nHARNESS_EOF\n';

/** Old harness specifier → the file that now holds the same exports. */
const MOVED = {
  '../src/engine/runtime.ts': '../src/engine/runtime/runtime.ts',
  '../src/engine/device.ts': '../src/engine/runtime/device.ts',
  '../src/engine/ops.ts': '../src/engine/ops/ops.ts',
  '../src/engine/model.ts': '../src/engine/model/model.ts',
  '../src/engine/kv_pages.ts': '../src/engine/model/kv_pages.ts',
  '../src/engine/batch.ts': '../src/engine/model/batch.ts',
  '../src/engine/train.ts': '../src/engine/train/train.ts',
  '../src/engine/bench_model.ts': '../src/engine/bench/model.ts',
  '../src/engine/bench_kernels.ts': '../src/engine/bench/kernels.ts',
  '../src/engine/bench_sampling.ts': '../src/engine/bench/sampling.ts',
};

// `import … from '…'` (static, type-only) and `import('…')` (dynamic), relative specifiers only.
const SPECIFIER = /(\bfrom\s*|\bimport\s*\(\s*)(['"])(\.{1,2}\/[^'"]+)\2/g;

function parseArgs(argv) {
  const opts = { source: resolve(ROOT, '../shared/tools/gpu_bench.sh'), out: resolve(ROOT, 'gpu_bench.sh') };
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--out') {
      if (!argv[i + 1]) throw new Error('gpu_bench_local: --out needs a file path');
      opts.out = resolve(argv[++i]);
    } else if (argv[i].startsWith('-')) {
      throw new Error(
        `gpu_bench_local: unknown option ${argv[i]}; usage at the top of scripts/device/gpu_bench_local.js`,
      );
    } else opts.source = resolve(argv[i]);
  }
  return opts;
}

/** The script with its harness's specifiers rewritten; throws naming every specifier that does not resolve. */
function rewrite(script, source) {
  const start = script.indexOf(OPEN);
  const end = start < 0 ? -1 : script.indexOf(CLOSE, start + OPEN.length);
  if (end < 0)
    throw new Error(
      `gpu_bench_local: ${source} has no harness heredoc (a line \`${OPEN.trim()}\` … HARNESS_EOF); ` +
        'update OPEN/CLOSE in scripts/device/gpu_bench_local.js to match the script',
    );
  const missing = [];
  const harness = script.slice(start + OPEN.length, end).replace(SPECIFIER, (_, lead, quote, spec) => {
    const now = MOVED[spec] ?? spec;
    if (!existsSync(resolve(HARNESS_DIR, now))) missing.push(now === spec ? spec : `${spec} (rewritten to ${now})`);
    return `${lead}${quote}${now}${quote}`;
  });
  if (missing.length)
    throw new Error(
      `gpu_bench_local: the harness in ${source} imports files that do not exist in ${ROOT}:\n  ${missing.join('\n  ')}\n` +
        'add the old → new path to MOVED in scripts/device/gpu_bench_local.js',
    );
  const note =
    `# Prepared from ${relative(ROOT, source)} by scripts/device/gpu_bench_local.js (harness imports moved to the engine's ` +
    'current files); regenerate it rather than editing it.\n';
  const body = script.slice(0, start + OPEN.length) + harness + script.slice(end);
  const shebang = body.startsWith('#!') ? body.indexOf('\n') + 1 : 0;
  return body.slice(0, shebang) + note + body.slice(shebang);
}

try {
  const opts = parseArgs(process.argv.slice(2));
  if (!existsSync(opts.source))
    throw new Error(`gpu_bench_local: no benchmark script at ${opts.source}; pass its path as the first argument`);
  writeFileSync(opts.out, rewrite(readFileSync(opts.source, 'utf8'), opts.source));
  chmodSync(opts.out, 0o755);
  console.log(`wrote ${relative(process.cwd(), opts.out) || opts.out}; run it from the repo root: bash gpu_bench.sh`);
} catch (err) {
  console.error(err.message);
  process.exit(1);
}
