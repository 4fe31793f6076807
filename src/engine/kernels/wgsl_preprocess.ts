/**
 * A tiny WGSL preprocessor for the few kernels that need source variants (things WGSL `override`
 * constants cannot express: `enable f16;`, a storage element type). Blocks are line comments, so
 * the file stays valid-looking WGSL for editors:
 *
 *   // #if F16
 *   enable f16;
 *   // #endif
 *   // #if F16_A
 *   alias TA = f16;
 *   // #else
 *   alias TA = f32;
 *   // #endif
 *
 * Every flag a caller passes must be used by some `#if` in the source, and every `#if` must name a
 * flag the caller passed: a renamed or deleted marker throws instead of silently producing the
 * default variant (a GpuError with data.code 'wgsl-preprocess': a bug in the kernel's source).
 * Directive lines become empty lines, so compiler line numbers stay the file's.
 */

import { GpuError } from '../../core/errors.ts';

const DIRECTIVE = /^\s*\/\/\s*#(if|else|endif)\b\s*(\S*)\s*$/;

/** The source with each `// #if FLAG` block kept or blanked according to `flags`. */
const fail = (msg: string) =>
  new GpuError(`${msg} (a bug in a kernel source; fix its #if markers)`, { code: 'wgsl-preprocess' });

export function preprocessWgsl(code: string, flags: Record<string, boolean>, label = 'shader'): string {
  const used = new Set<string>();
  // one entry per open block: is this branch kept, and has an #else been seen
  const stack: { keep: boolean; parentKeep: boolean; flag: string; inElse: boolean }[] = [];
  const lines = code.split('\n');
  const out: string[] = [];
  const live = () => (stack.length ? stack[stack.length - 1]!.keep : true);
  lines.forEach((line, i) => {
    const m = DIRECTIVE.exec(line);
    if (!m) {
      out.push(live() ? line : '');
      return;
    }
    const [, kind, arg] = m;
    const where = `${label}:${i + 1}`;
    if (kind === 'if') {
      if (!arg) throw fail(`${where}: "#if" needs a flag name`);
      if (!(arg in flags)) throw fail(`${where}: flag "${arg}" is not set; pass it (true or false) to preprocessWgsl`);
      used.add(arg);
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
  for (const f of Object.keys(flags))
    if (!used.has(f)) throw fail(`${label}: no "// #if ${f}" block in the source; the variant would be unchanged`);
  return out.join('\n');
}
