// Imports run downward only where eslint's layer rules do not look: no module under src/ imports
// from scripts/ (a script may use src/, never the reverse), nor does any product module (src/,
// workers/, bin/) load one at run time by naming its path (`new URL('../scripts/x.js',
// import.meta.url)`, a worker's `--import`): the TypeScript loader is the entry points' (bin/), and in
// src/cli only the dispatcher
// (spade.ts) and the commands (cmd_*.ts) import a command module — a shared helper lives in a helper
// module or in platform/. Every static, re-exported, side-effect and dynamic import is read.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(dirname(new URL(import.meta.url).pathname), '../..');

function files(dir: string, out: string[] = []): string[] {
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) files(p, out);
    else if (/\.(ts|js|svelte)$/.test(name) && !name.endsWith('.d.ts')) out.push(p);
  }
  return out;
}

const SPECIFIER =
  /^[ \t]*(?:import|export)\b[^;'"`]*?\bfrom\s*(['"])([^'"]+)\1|^[ \t]*import\s*(['"])([^'"]+)\3|\bimport\s*\(\s*(['"])([^'"]+)\5/gm;

/** Each relative import of `file`, as a path from the repository root. */
function imports(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  return [...text.matchAll(SPECIFIER)]
    .map((m) => m[2] ?? m[4] ?? m[6]!)
    .filter((s) => s.startsWith('.'))
    .map((s) => relative(ROOT, resolve(dirname(file), s)));
}

const COMMENTS = /\/\*[\s\S]*?\*\/|^[ \t]*\/\/.*$/gm;
const QUOTED = /(['"`])((?:(?!\1)[^\\\n])*)\1/g;

/**
 * Every path a file names in a string literal (comments aside) that lands in scripts/: a relative
 * one resolved from the file, any other that has a scripts/ folder in it as written.
 */
function scriptPaths(file: string, text: string): string[] {
  return [...text.replace(COMMENTS, '').matchAll(QUOTED)]
    .map((m) => m[2]!)
    .map((s) => (s.startsWith('.') ? relative(ROOT, resolve(dirname(file), s.split('?')[0]!)) : s))
    .filter((s) => /^(\.\/)?scripts\/|\/scripts\/[^/]+\.[cm]?[jt]s$/.test(s));
}

describe('import direction', () => {
  it('no module under src/ imports from scripts/', () => {
    const back = files(join(ROOT, 'src')).flatMap((f) =>
      imports(f)
        .filter((to) => to.startsWith('scripts/'))
        .map((to) => `${relative(ROOT, f)} → ${to}`),
    );
    expect(back).toEqual([]);
  });

  it('no product module loads a file from scripts/ at run time, by import or by naming its path', () => {
    // the detector itself: a worker's loader named by URL, by --import and by an import
    const probe = join(ROOT, 'src/platform/node/probe.ts');
    expect(scriptPaths(probe, "const R = new URL('../../../scripts/register.js', import.meta.url).href;")).toEqual([
      'scripts/register.js',
    ]);
    expect(scriptPaths(probe, "new Worker(entry, { execArgv: ['--import', './scripts/register.js'] });")).toHaveLength(
      1,
    );
    expect(scriptPaths(probe, "// see '../../../scripts/register.js'\nconst ok = '../rpc.ts';")).toEqual([]);
    const product = [...files(join(ROOT, 'src')), ...files(join(ROOT, 'workers')), ...files(join(ROOT, 'bin'))];
    expect(product.some((f) => f.endsWith('bin/spade.js'))).toBe(true);
    const loads = product.flatMap((f) =>
      scriptPaths(f, readFileSync(f, 'utf8')).map((to) => `${relative(ROOT, f)} → ${to}`),
    );
    expect(loads).toEqual([]);
  });

  it('only the dispatcher and the commands import a command module', () => {
    const helpers = files(join(ROOT, 'src/cli')).filter((f) => !/\/(cmd_[^/]+|spade)\.ts$/.test(f));
    expect(helpers.length).toBeGreaterThan(3);
    const back = helpers.flatMap((f) =>
      imports(f)
        .filter((to) => /^src\/cli\/cmd_[^/]+\.ts$/.test(to))
        .map((to) => `${relative(ROOT, f)} → ${to}`),
    );
    expect(back).toEqual([]);
  });
});
