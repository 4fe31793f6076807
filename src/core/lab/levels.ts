/**
 * Level descriptions: what the Lab's designer writes, and the pure parser that turns one into
 * a level (families.ts). Two forms are read:
 *   long  "F2 L3 A1 D0"  family index, then the knob levels (any order of L/A/D after F; spaces optional)
 *   short "2310"         the first four digits: family, L, A, D — what the tiny designer model writes
 *                        (its vocabulary is the digits 0–3, so every reply of four tokens is a level)
 * Knob digits above 3 are clamped to 3 (and the result says so). A description with no family, an
 * unknown family or a missing knob is an invalid design: the lab gives it the method's invalid-design
 * reward (0) and plays nothing.
 */
import { FAMILIES, KNOB_MAX, type Level } from './families.ts';

export type ParsedLevel = { ok: true; level: Level; clamped: boolean } | { ok: false; reason: string };

const clampKnob = (d: number) => Math.min(KNOB_MAX, Math.max(0, d));

/** Parse a level description (see the file header). Pure; never throws. */
export function parseLevel(text: string): ParsedLevel {
  const s = String(text ?? '').slice(0, 200);
  let raw: { family: number; L: number; A: number; D: number };
  const f = /F\s*(\d)/i.exec(s);
  if (f) {
    const knob = (k: string) => {
      const m = new RegExp(`${k}\\s*(\\d)`, 'i').exec(s.slice(f.index + f[0].length));
      return m ? Number(m[1]) : null;
    };
    const [L, A, D] = [knob('L'), knob('A'), knob('D')];
    if (L === null || A === null || D === null)
      return { ok: false, reason: `"${s}" names a family but not all of L, A and D (write e.g. "F2 L1 A3 D0")` };
    raw = { family: Number(f[1]), L, A, D };
  } else {
    const digits = s.replace(/[^0-9]/g, '');
    if (digits.length < 4)
      return { ok: false, reason: `"${s}" is not a level: write four digits (family, L, A, D) or e.g. "F2 L1 A3 D0"` };
    raw = { family: Number(digits[0]), L: Number(digits[1]), A: Number(digits[2]), D: Number(digits[3]) };
  }
  if (raw.family >= FAMILIES.length)
    return { ok: false, reason: `family ${raw.family} does not exist (0-${FAMILIES.length - 1})` };
  const level: Level = { family: raw.family, L: clampKnob(raw.L), A: clampKnob(raw.A), D: clampKnob(raw.D) };
  const clamped = level.L !== raw.L || level.A !== raw.A || level.D !== raw.D;
  return { ok: true, level, clamped };
}
