/**
 * A tiny WGSL preprocessor: source variants (things WGSL `override` constants cannot express:
 * `enable f16;`, a storage element type) and shared snippets. Directives are line comments, so
 * the file stays valid-looking WGSL for editors:
 *
 *   // #include "grid.wgsl"
 *   // #if F16
 *   enable f16;
 *   // #endif
 *   // #if F16_A
 *   alias TA = f16;
 *   // #else
 *   alias TA = f32;
 *   // #endif
 *
 * `#include "name.wgsl"` splices in a snippet of the registry (wgsl_snippets.ts; tests pass their
 * own), preprocessed with the same flags. A snippet is spliced once per shader: a second include
 * of it, directly or through another snippet, is dropped (WGSL rejects a declaration made twice),
 * and a snippet that includes itself, directly or not, throws and names the chain.
 *
 * Every flag a caller passes must be used by some `#if` in the source or its snippets, and every
 * `#if` must name a flag the caller passed: a renamed or deleted marker throws instead of silently
 * producing the default variant (a GpuError with data.code 'wgsl-preprocess': a bug in the
 * kernel's source). Directive lines become empty lines, so the compiler's line numbers are the
 * file's up to its first `#include` (past one, they are offset by the snippet's lines).
 */

import { GpuError } from '../../core/errors.ts';
import { WGSL_SNIPPETS } from './wgsl_snippets.ts';

const DIRECTIVE = /^\s*\/\/\s*#(if|else|endif|include)\b\s*(.*?)\s*$/;
const INCLUDE_ARG = /^"([\w.-]+)"$/;

const fail = (msg: string) =>
  new GpuError(`${msg} (a bug in a kernel source; fix its #if / #include markers)`, { code: 'wgsl-preprocess' });

/** State shared by a shader and the snippets it includes. */
interface Run {
  flags: Record<string, boolean>;
  snippets: Readonly<Record<string, string>>;
  used: Set<string>;
  included: Set<string>;
}

/**
 * The source with each `// #if FLAG` block kept or blanked according to `flags` and each live
 * `// #include "name"` replaced by that snippet of `snippets`.
 */
export function preprocessWgsl(
  code: string,
  flags: Record<string, boolean>,
  label = 'shader',
  snippets: Readonly<Record<string, string>> = WGSL_SNIPPETS,
): string {
  const run: Run = { flags, snippets, used: new Set(), included: new Set() };
  const out = expand(code, label, [], run);
  for (const f of Object.keys(flags))
    if (!run.used.has(f)) throw fail(`${label}: no "// #if ${f}" block in the source; the variant would be unchanged`);
  return out.join('\n');
}

/**
 * A shader that needs no flags, preprocessed on first use (its snippets spliced in) and kept:
 * `const code = wgslOnce(shader, 'adamw.wgsl')`, then `code()` wherever the source is needed.
 */
export function wgslOnce(code: string, label: string): () => string {
  let done: string | undefined;
  return () => (done ??= preprocessWgsl(code, {}, label));
}

/** The lines of `code` (file `label`, reached through the includes in `chain`). */
function expand(code: string, label: string, chain: string[], run: Run): string[] {
  const { flags } = run;
  // one entry per open block: is this branch kept, and has an #else been seen
  const stack: { keep: boolean; parentKeep: boolean; flag: string; inElse: boolean }[] = [];
  const out: string[] = [];
  const live = () => (stack.length ? stack[stack.length - 1]!.keep : true);
  code.split('\n').forEach((line, i) => {
    const m = DIRECTIVE.exec(line);
    if (!m) {
      out.push(live() ? line : '');
      return;
    }
    const [, kind, arg] = m;
    const where = `${label}:${i + 1}`;
    if (kind === 'include') {
      const name = INCLUDE_ARG.exec(arg!)?.[1];
      if (!name) throw fail(`${where}: "#include" needs a quoted snippet name, as in // #include "grid.wgsl"`);
      if (!live()) return void out.push('');
      if (chain.includes(name) || name === label)
        throw fail(`${where}: include cycle ${[...chain, label, name].join(' → ')}`);
      const snippet = run.snippets[name];
      if (snippet === undefined) {
        const known = Object.keys(run.snippets).join(', ') || 'none';
        throw fail(`${where}: unknown snippet "${name}"; add it to wgsl_snippets.ts (known: ${known})`);
      }
      if (run.included.has(name)) return void out.push('');
      run.included.add(name);
      out.push(...expand(snippet, name, [...chain, label], run));
      return;
    }
    if (kind === 'if') {
      if (!arg) throw fail(`${where}: "#if" needs a flag name`);
      if (!(arg in flags)) throw fail(`${where}: flag "${arg}" is not set; pass it (true or false) to preprocessWgsl`);
      run.used.add(arg);
      const parentKeep = live();
      stack.push({ keep: parentKeep && flags[arg]!, parentKeep, flag: arg, inElse: false });
    } else if (kind === 'else') {
      const top = stack[stack.length - 1];
      if (!top || top.inElse) throw fail(`${where}: "#else" without a matching "#if"`);
      top.inElse = true;
      top.keep = top.parentKeep && !flags[top.flag]!;
    } else {
      if (!stack.pop()) throw fail(`${where}: "#endif" without a matching "#if"`);
    }
    out.push('');
  });
  if (stack.length) throw fail(`${label}: "#if ${stack[stack.length - 1]!.flag}" is never closed`);
  return out;
}
