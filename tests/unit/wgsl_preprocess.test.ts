// The WGSL preprocessor's #include: snippets spliced once, with the shader's flags, cycles and
// unknown names refused with a GpuError naming the file; and every kernel's includes resolve.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { GpuError } from '../../src/core/errors.ts';
import { preprocessWgsl, wgslOnce } from '../../src/engine/kernels/wgsl_preprocess.ts';
import { WGSL_SNIPPETS } from '../../src/engine/kernels/wgsl_snippets.ts';

const lines = (s: string) => s.split('\n').filter((l) => l !== '');

/** The GpuError a call throws (fails the test when it returns). */
function thrown(f: () => unknown): GpuError {
  try {
    f();
  } catch (err) {
    expect(err).toBeInstanceOf(GpuError);
    expect((err as GpuError).data.code).toBe('wgsl-preprocess');
    return err as GpuError;
  }
  throw new Error('expected a GpuError');
}

describe('WGSL #include', () => {
  it('splices a snippet where the directive stands, and snippets it includes', () => {
    const snippets = { 'a.wgsl': 'fn a() {}\n// #include "b.wgsl"', 'b.wgsl': 'fn b() {}' };
    const out = preprocessWgsl('top;\n// #include "a.wgsl"\nbottom;', {}, 'k.wgsl', snippets);
    expect(lines(out)).toEqual(['top;', 'fn a() {}', 'fn b() {}', 'bottom;']);
  });

  it('splices each snippet once per shader, however often it is named', () => {
    const snippets = { 'a.wgsl': '// #include "c.wgsl"\nfn a() {}', 'c.wgsl': 'fn c() {}' };
    const src = '// #include "c.wgsl"\n// #include "a.wgsl"\n// #include "c.wgsl"';
    expect(lines(preprocessWgsl(src, {}, 'k.wgsl', snippets))).toEqual(['fn c() {}', 'fn a() {}']);
    // a second shader gets its own copy
    expect(lines(preprocessWgsl('// #include "c.wgsl"', {}, 'k2.wgsl', snippets))).toEqual(['fn c() {}']);
  });

  it('applies the shader flags inside snippets, and skips includes in a dropped branch', () => {
    const snippets = { 'f.wgsl': '// #if F16\nalias T = f16;\n// #else\nalias T = f32;\n// #endif', 'x.wgsl': 'x;' };
    const src = '// #include "f.wgsl"\n// #if EXTRA\n// #include "x.wgsl"\n// #endif';
    expect(lines(preprocessWgsl(src, { F16: true, EXTRA: false }, 'k.wgsl', snippets))).toEqual(['alias T = f16;']);
    expect(lines(preprocessWgsl(src, { F16: false, EXTRA: true }, 'k.wgsl', snippets))).toEqual([
      'alias T = f32;',
      'x;',
    ]);
    // a flag used only inside a snippet counts as used
    expect(() => preprocessWgsl('// #include "f.wgsl"', { F16: true }, 'k.wgsl', snippets)).not.toThrow();
  });

  it('refuses a cycle, naming the chain', () => {
    const snippets = {
      'a.wgsl': '// #include "b.wgsl"',
      'b.wgsl': '// #include "a.wgsl"',
      's.wgsl': '// #include "s.wgsl"',
    };
    expect(thrown(() => preprocessWgsl('// #include "a.wgsl"', {}, 'k.wgsl', snippets)).message).toContain(
      'k.wgsl → a.wgsl → b.wgsl → a.wgsl',
    );
    expect(thrown(() => preprocessWgsl('// #include "s.wgsl"', {}, 'k.wgsl', snippets)).message).toContain(
      's.wgsl → s.wgsl',
    );
  });

  it('refuses an unknown snippet or a malformed include, naming the file and line', () => {
    const err = thrown(() => preprocessWgsl('a;\n// #include "nope.wgsl"', {}, 'k.wgsl', { 'a.wgsl': '' }));
    expect(err.message).toContain('k.wgsl:2');
    expect(err.message).toContain('unknown snippet "nope.wgsl"');
    expect(err.message).toContain('wgsl_snippets.ts');
    thrown(() => preprocessWgsl('// #include nope.wgsl', {}, 'k.wgsl', {}));
    // an #if a snippet leaves open is its own error, not the shader's
    expect(
      thrown(() => preprocessWgsl('// #include "o.wgsl"', { X: true }, 'k.wgsl', { 'o.wgsl': '// #if X' })).message,
    ).toContain('o.wgsl');
  });

  it('wgslOnce preprocesses with the registry on first use and keeps the result', () => {
    const get = wgslOnce('// #include "grid.wgsl"\noverride WG: u32 = 64u;', 'k.wgsl');
    expect(get()).toContain('fn grid_thread(');
    expect(get()).toBe(get());
  });
});

describe('kernel sources', () => {
  const dir = fileURLToPath(new URL('../../src/engine/kernels/', import.meta.url));
  const read = (sub: string) =>
    readdirSync(join(dir, sub))
      .filter((f) => f.endsWith('.wgsl'))
      .map((f) => ({ file: f, src: readFileSync(join(dir, sub, f), 'utf8') }));
  const kernels = read('.');
  const shared = read('shared');

  it('name only snippets of the registry, and every snippet file is registered and used', () => {
    const named = new Set<string>();
    for (const { file, src } of [...kernels, ...shared])
      for (const m of src.matchAll(/^\s*\/\/\s*#include\s+"([^"]+)"/gm)) {
        expect(WGSL_SNIPPETS, `${file} includes ${m[1]}`).toHaveProperty([m[1]!]);
        named.add(m[1]!);
      }
    const files = shared.map((s) => s.file).sort();
    expect(Object.keys(WGSL_SNIPPETS).sort()).toEqual(files);
    for (const f of files) expect([...named], `${f} is included somewhere`).toContain(f);
    for (const { file, src } of shared) expect(WGSL_SNIPPETS[file]).toBe(src);
  });
});
