// Builds a program that shares another program's env id (envId: a 32-bit FNV-1a hash of the code and
// its length), as a hostile designer or link author would: any body, padded in a comment to the
// target's length, then two characters chosen so the hash lands on the target's (FNV-1a is invertible
// step by step, so this takes at most a few hundred thousand hash steps, not 2^32 tries).
import { envId } from '../../src/core/env/envset.ts';

const P = 0x01000193;
/** P's inverse mod 2^32 (Newton's iteration; P is odd). */
const P_INV = (() => {
  let x = P;
  for (let i = 0; i < 5; i++) x = Math.imul(x, 2 - Math.imul(P, x));
  return x >>> 0;
})();

function fnv(text: string, h = 0x811c9dc5): number {
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), P);
  return h >>> 0;
}

/** Characters that survive a comment and UTF-8 (no line terminators, no lone surrogates). */
const usable = (c: number) => c >= 0x20 && c !== 0x2028 && c !== 0x2029 && (c < 0xd800 || c > 0xdfff);

/** A program that starts with `body` and has exactly the env id of `target`. */
export function forgeSameId(target: string, body: string): string {
  const want = Math.imul(fnv(target), P_INV) >>> 0; // the hash before the last character's step
  const room = target.length - body.length - 3 - 2;
  if (room < 1) throw new Error('the body is too long to pad to the target length');
  for (const pad of 'xyzwvutsrq') {
    const prefix = `${body}\n//${pad.repeat(room)}`;
    const h0 = fnv(prefix);
    for (let c1 = 0x20; c1 <= 0xffff; c1++) {
      if (!usable(c1)) continue;
      const h1 = Math.imul(h0 ^ c1, P) >>> 0;
      if (h1 >>> 16 !== want >>> 16) continue;
      const c2 = (h1 ^ want) & 0xffff;
      if (!usable(c2)) continue;
      const code = prefix + String.fromCharCode(c1, c2);
      if (envId(code) === envId(target) && code !== target) return code;
    }
  }
  throw new Error('no collision found');
}
