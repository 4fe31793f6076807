#!/usr/bin/env node
// The longest functions in a folder (default src/core), by line count from the first line of the
// declaration to its closing brace, found with the TypeScript compiler API (`typescript` is already a
// dev dependency). Every function-like node counts: declarations, methods, constructors, accessors,
// arrow functions and function expressions; a nested function is counted on its own and also inside
// its parent. A file-level wrapper `(function (global) { … })(globalThis)` (the sandbox prelude) is a
// module, not a function: it is named in a note and left out of the ranking.
// Usage: node scripts/longest_function.js [DIR] [--top N]   (N defaults to 10)
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import ts from 'typescript';

const ROOT = resolve(new URL('..', import.meta.url).pathname);
const args = process.argv.slice(2);
const topAt = args.indexOf('--top');
const top = topAt >= 0 ? Number(args.splice(topAt, 2)[1]) : 10;
const dir = resolve(ROOT, args[0] ?? 'src/core');

function walk(d, out) {
  for (const name of readdirSync(d)) {
    const p = join(d, name);
    if (statSync(p).isDirectory()) walk(p, out);
    else if (/\.(ts|js|mjs)$/.test(name) && !name.endsWith('.d.ts')) out.push(p);
  }
  return out;
}

/** A readable name: the declaration's own, or the variable / property / call it is assigned to. */
function nameOf(node, sf) {
  const own = node.name && ts.isIdentifier(node.name) ? node.name.text : node.name?.getText(sf);
  if (ts.isConstructorDeclaration(node)) return `${classOf(node)}constructor`;
  if (own) return ts.isMethodDeclaration(node) || ts.isAccessor(node) ? `${classOf(node)}${own}` : own;
  const p = node.parent;
  if (ts.isVariableDeclaration(p) || ts.isPropertyAssignment(p) || ts.isPropertyDeclaration(p))
    return `${ts.isPropertyDeclaration(p) ? classOf(p) : ''}${p.name.getText(sf)}`;
  if (ts.isCallExpression(p)) return `(callback of ${p.expression.getText(sf).slice(0, 40)})`;
  return '(anonymous)';
}

function classOf(member) {
  const c = member.parent;
  return c && (ts.isClassDeclaration(c) || ts.isClassExpression(c)) && c.name ? `${c.name.text}.` : '';
}

/** `(function () { … })(…);` as a statement of the file itself. */
function isFileWrapper(node) {
  let call = node.parent;
  while (ts.isParenthesizedExpression(call)) call = call.parent;
  return ts.isCallExpression(call) && ts.isExpressionStatement(call.parent) && ts.isSourceFile(call.parent.parent);
}

const found = [];
const wrappers = [];
for (const file of walk(dir, [])) {
  const sf = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);
  const visit = (node) => {
    if (ts.isFunctionLike(node) && 'body' in node && node.body) {
      const start = sf.getLineAndCharacterOfPosition(node.getStart(sf)).line;
      const end = sf.getLineAndCharacterOfPosition(node.getEnd()).line;
      const entry = { lines: end - start + 1, name: nameOf(node, sf), where: `${relative(ROOT, file)}:${start + 1}` };
      (isFileWrapper(node) ? wrappers : found).push(entry);
    }
    ts.forEachChild(node, visit);
  };
  visit(sf);
}
found.sort((a, b) => b.lines - a.lines);
console.log(`${found.length} functions under ${relative(ROOT, dir)}; the ${Math.min(top, found.length)} longest:`);
for (const w of wrappers) console.log(`(left out: the ${w.lines}-line file wrapper at ${w.where})`);
for (const f of found.slice(0, top)) console.log(`${String(f.lines).padStart(5)} lines  ${f.name}  (${f.where})`);
