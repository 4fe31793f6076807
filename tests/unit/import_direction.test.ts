// What no import shows, and so dependency-cruiser (.dependency-cruiser.js, in npm run check) cannot see:
// no product module (src/, workers/, bin/) loads a file from scripts/ at run time by naming its path
// (`new URL('../scripts/x.js', import.meta.url)`, a worker's `--import`): the TypeScript loader is the
// entry points' (bin/). That nothing in the product imports from scripts/, and that in src/cli only the
// dispatcher (spade.ts) and the commands (cmd_*.ts) import a command module, are dependency-cruiser's
// rules (no-scripts-in-the-product, cli-commands-from-the-dispatcher; tests/unit/lint_layers.test.ts).
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
});
