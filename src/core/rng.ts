/**
 * Seeded pseudo-random numbers, passed explicitly. Never patch Math.random: every
 * consumer receives an Rng built from a seed that lives in config (and the URL).
 *
 * Algorithm: sfc32 seeded through splitmix32, so small consecutive seeds
 * (0, 1, 2, ...) still give unrelated streams.
 */

export interface Rng {
  /** Uniform float in [0, 1). */
  next(): number;
  /** Uniform integer in [0, n). Throws RangeError for n < 1. */
  int(n: number): number;
  /** A fresh, independent generator derived from this one (for sub-tasks). */
  fork(): Rng;
  /** Uniformly chosen element; throws RangeError on an empty array. */
  pick<T>(items: readonly T[]): T;
  /** New array, Fisher-Yates shuffled. */
  shuffle<T>(items: readonly T[]): T[];
  /** k distinct elements in random order (k clipped to the array length). */
  sample<T>(items: readonly T[], k: number): T[];
}

function splitmix32(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x9e3779b9) >>> 0;
    let z = s;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
    return (z ^ (z >>> 16)) >>> 0;
  };
}

/** Hash any string to a 32-bit seed (FNV-1a), e.g. to derive per-item seeds from ids. */
export function hashSeed(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

export function createRng(seed: number): Rng {
  if (!Number.isFinite(seed)) throw new RangeError(`seed must be a finite number, got ${seed}`);
  const init = splitmix32(Math.floor(seed));
  let a = init(),
    b = init(),
    c = init(),
    d = init();
  const u32 = (): number => {
    const t = (((a + b) >>> 0) + d) >>> 0;
    d = (d + 1) >>> 0;
    a = b ^ (b >>> 9);
    b = (c + (c << 3)) >>> 0;
    c = (c << 21) | (c >>> 11);
    c = (c + t) >>> 0;
    return t;
  };
  for (let i = 0; i < 12; i++) u32(); // discard warm-up outputs
  const rng: Rng = {
    next: () => u32() / 4294967296,
    int(n) {
      if (!(n >= 1)) throw new RangeError(`int(n) needs n >= 1, got ${n}`);
      return Math.floor(rng.next() * Math.floor(n));
    },
    fork: () => createRng(u32()),
    pick(items) {
      if (items.length === 0) throw new RangeError('pick() from an empty array');
      return items[rng.int(items.length)]!;
    },
    shuffle(items) {
      const out = items.slice();
      for (let i = out.length - 1; i > 0; i--) {
        const j = rng.int(i + 1);
        [out[i], out[j]] = [out[j]!, out[i]!];
      }
      return out;
    },
    sample(items, k) {
      return rng.shuffle(items).slice(0, Math.max(0, Math.min(k, items.length)));
    },
  };
  return rng;
}
