#!/usr/bin/env node
// Import cycles between the repo's own modules. Reads every .ts/.js/.mjs/.svelte file under the
// given folders (default: src workers scripts), resolves its relative imports — static, `import type`,
// `export … from`, side-effect and dynamic `import('…')` alike, since each one ties the two modules
// together — and finds the strongly connected components with Tarjan's algorithm. Prints the number
// of cycles (components of two or more files, or a file importing itself), one concrete cycle path
// for each, and exits 1 if there is any. Usage: node scripts/import_cycles.js [DIR...]
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

const ROOT = resolve(dirname(new URL(import.meta.url).pathname), '..');
const CODE = /\.(ts|js|mjs|svelte)$/;
const dirs = process.argv.slice(2).length ? process.argv.slice(2) : ['src', 'workers', 'scripts'];

function walk(dir, out) {
  if (!existsSync(dir)) return out;
  for (const name of readdirSync(dir)) {
    if (name === 'node_modules' || name.startsWith('.')) continue;
    const p = join(dir, name);
    if (statSync(p).isDirectory()) walk(p, out);
    else if (CODE.test(name) && !name.endsWith('.d.ts')) out.push(p);
  }
  return out;
}

// Static imports and re-exports start a line (`import … from '…'`, `export … from '…'`,
// `import '…'`); dynamic ones can sit anywhere on a line that is not a comment.
const STATIC = /^[ \t]*(?:import|export)\b[^;'"`]*?\bfrom\s*(['"])([^'"]+)\1/gm;
const BARE = /^[ \t]*import\s*(['"])([^'"]+)\1/gm;
const DYNAMIC = /^(?![ \t]*(?:\/\/|\*)).*?\bimport\s*\(\s*(['"])([^'"]+)\1/gm;

function specifiers(file) {
  let text = readFileSync(file, 'utf8');
  if (file.endsWith('.svelte'))
    text = [...text.matchAll(/<script\b[^>]*>([\s\S]*?)<\/script>/g)].map((m) => m[1]).join('\n');
  const out = [];
  for (const re of [STATIC, BARE, DYNAMIC]) for (const m of text.matchAll(re)) out.push(m[2]);
  return out;
}

/** A relative specifier → the file it names, or undefined (packages, assets, `?raw` WGSL). */
function resolveImport(from, spec) {
  if (!spec.startsWith('.')) return undefined;
  const base = resolve(dirname(from), spec.split('?')[0]);
  const candidates = [base, base.replace(/\.js$/, '.ts'), `${base}.ts`, `${base}.js`, join(base, 'index.ts')];
  return candidates.find((c) => CODE.test(c) && existsSync(c) && statSync(c).isFile());
}

const files = dirs.flatMap((d) => walk(resolve(ROOT, d), []));
const graph = new Map(files.map((f) => [f, new Set()]));
for (const f of files)
  for (const spec of specifiers(f)) {
    const target = resolveImport(f, spec);
    if (target && graph.has(target)) graph.get(f).add(target);
  }

// Tarjan's strongly connected components (iterative, so deep import chains cannot overflow the stack).
function tarjan(g) {
  let next = 0;
  const index = new Map();
  const low = new Map();
  const onStack = new Set();
  const stack = [];
  const sccs = [];
  for (const start of g.keys()) {
    if (index.has(start)) continue;
    const work = [[start, [...g.get(start)], 0]];
    index.set(start, next);
    low.set(start, next++);
    stack.push(start);
    onStack.add(start);
    while (work.length) {
      const frame = work[work.length - 1];
      const [v, edges] = frame;
      if (frame[2] < edges.length) {
        const w = edges[frame[2]++];
        if (!index.has(w)) {
          index.set(w, next);
          low.set(w, next++);
          stack.push(w);
          onStack.add(w);
          work.push([w, [...g.get(w)], 0]);
        } else if (onStack.has(w)) low.set(v, Math.min(low.get(v), index.get(w)));
        continue;
      }
      work.pop();
      if (work.length) {
        const parent = work[work.length - 1][0];
        low.set(parent, Math.min(low.get(parent), low.get(v)));
      }
      if (low.get(v) === index.get(v)) {
        const scc = [];
        let w;
        do {
          w = stack.pop();
          onStack.delete(w);
          scc.push(w);
        } while (w !== v);
        if (scc.length > 1 || g.get(v).has(v)) sccs.push(scc);
      }
    }
  }
  return sccs;
}

/** One concrete cycle through `start` inside its component (breadth-first, so the shortest). */
function cycleThrough(start, members) {
  const inScc = new Set(members);
  const prev = new Map();
  const queue = [start];
  while (queue.length) {
    const v = queue.shift();
    for (const w of graph.get(v)) {
      if (!inScc.has(w)) continue;
      if (w === start) {
        const path = [v];
        while (path[0] !== start) path.unshift(prev.get(path[0]));
        return [...path, start];
      }
      if (!prev.has(w)) {
        prev.set(w, v);
        queue.push(w);
      }
    }
  }
  return [start];
}

/** Elementary cycles inside one component (each counted once, from its earliest member); stops at `cap`. */
function countElementary(members, cap) {
  const order = new Map(members.map((m, i) => [m, i]));
  let count = 0;
  for (const s of members) {
    const onPath = new Set([s]);
    const dfs = (v) => {
      for (const w of graph.get(v)) {
        if (count >= cap || !order.has(w) || order.get(w) < order.get(s)) continue;
        if (w === s) count++;
        else if (!onPath.has(w)) {
          onPath.add(w);
          dfs(w);
          onPath.delete(w);
        }
      }
    };
    dfs(s);
  }
  return count;
}

const rel = (f) => relative(ROOT, f);
const sccs = tarjan(graph);
const CAP = 100000;
const elementary = sccs.reduce((n, scc) => n + countElementary(scc, CAP), 0);
console.log(`${files.length} files, ${[...graph.values()].reduce((n, s) => n + s.size, 0)} relative imports`);
console.log(
  `${sccs.length} import cycle${sccs.length === 1 ? '' : 's'} (groups of mutually importing files); ` +
    `${elementary}${elementary >= CAP ? '+' : ''} elementary cycle path${elementary === 1 ? '' : 's'}`,
);
for (const scc of sccs) {
  const members = scc.map(rel).sort();
  console.log(`\n  ${members.length} files: ${members.join(', ')}`);
  for (const m of scc.sort()) console.log(`    ${cycleThrough(m, scc).map(rel).join(' → ')}`);
}
process.exit(sccs.length ? 1 : 0);
