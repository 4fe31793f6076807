// scripts/import_cycles.js: finds cycles through static, type-only and dynamic relative imports (and
// .svelte scripts), names the files, exits 1 on any; and the repo itself has none.
//   npx vitest run --project unit tests/unit/import_cycles.test.ts
import { spawnSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const script = join(import.meta.dirname, '../../scripts/import_cycles.js');
const cycles = (...dirs: string[]) => {
  const r = spawnSync(process.execPath, [script, ...dirs], { encoding: 'utf8' });
  return { code: r.status, out: r.stdout };
};

function tree(files: Record<string, string>): string {
  const root = mkdtempSync(join(tmpdir(), 'spade-cycles-'));
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(join(root, path, '..'), { recursive: true });
    writeFileSync(join(root, path), text);
  }
  return root;
}

describe('import_cycles.js', () => {
  it('passes an acyclic tree, ignoring packages, ?raw assets and imports quoted in comments', () => {
    const root = tree({
      'a.ts': "import { b } from './b.ts';\nimport x from 'pkg';\nimport w from './k.wgsl?raw';\n",
      'b.ts': "// import('./a.ts') is how a.ts would be loaded lazily\nexport const b = 1;\n",
      'k.wgsl': '',
    });
    const r = cycles(root);
    expect(r.out).toContain('0 import cycles');
    expect(r.code).toBe(0);
  });

  it('finds a cycle closed by a type-only import and one closed by a dynamic import, and exits 1', () => {
    const root = tree({
      'x/a.ts': "import type { B } from './b.ts';\nexport type A = 1;\n",
      'x/b.ts': "import {\n  type A,\n} from './a.ts';\nexport type B = A;\n",
      'y/main.ts': "export const load = () => import('./cmd.ts');\n",
      'y/cmd.ts': "import { helper } from '../z/helpers.js';\n",
      'z/helpers.ts': "export { load as helper } from '../y/main.ts';\n",
      'z/free.ts': "import { b } from '../x/b.ts';\n",
    });
    const r = cycles(root);
    expect(r.code).toBe(1);
    expect(r.out).toContain('2 import cycles');
    expect(r.out).toMatch(/2 files: .*x\/a\.ts, .*x\/b\.ts/);
    expect(r.out).toMatch(/3 files: .*y\/cmd\.ts, .*y\/main\.ts, .*z\/helpers\.ts/);
    expect(r.out).not.toMatch(/free\.ts →/);
  });

  it('reads the script blocks of .svelte files', () => {
    const root = tree({
      'Panel.svelte': '<script lang="ts">\n  import { s } from \'./state.svelte.ts\';\n</script>\n<p>{s}</p>\n',
      'state.svelte.ts': "import Panel from './Panel.svelte';\nexport const s = Panel;\n",
    });
    const r = cycles(root);
    expect(r.code).toBe(1);
    expect(r.out).toContain('1 import cycle ');
  });

  it('finds no cycle in src/, workers/ and scripts/', () => {
    const r = cycles();
    expect(r.out).toContain('0 import cycles');
    expect(r.code).toBe(0);
  });
});
