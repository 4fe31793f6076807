/**
 * What a guest's call returns, read and checked on the host (host.ts): the prelude answers every
 * call with one JSON string built inside the guest (step's well-formed 5-tuple bare, as an array;
 * everything else as a record), which is parsed once and held to the environment contract —
 * reset's [observation, info], step's [observation, reward, terminated, truncated, info] (reward
 * finite and in [-1, 1]), solution's list of actions — or refused with an EnvContractError saying
 * what came back and what to return instead.
 */
import { EnvContractError } from '../errors.ts';
import type { ResetResult, StepResult } from '../env/contract.ts';
import type { SandboxLimits } from '../env/limits.ts';
import { checkObservation } from './screen.ts';

export type GuestReply =
  | { ok: true; value: unknown; nonFinite?: unknown }
  | { ok: false; error: { name: string; message: string; stack?: string } };

/** The prelude lists the top-level slots that held NaN or ±Infinity (JSON has no such numbers). */
function restoreNonFinite(value: unknown, marks: unknown): unknown {
  if (!Array.isArray(value) || !Array.isArray(marks)) return value;
  for (const m of marks as unknown[]) {
    if (!Array.isArray(m) || m.length !== 2) continue;
    const [i, s] = m as [unknown, unknown];
    if (typeof i === 'number' && Number.isInteger(i) && i >= 0 && i < value.length && value[i] === null) {
      if (s === 'NaN' || s === 'Infinity' || s === '-Infinity') value[i] = Number(s);
    }
  }
  return value;
}

export function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return `an array of ${value.length}`;
  if (typeof value === 'number' && !Number.isFinite(value)) return String(value);
  return typeof value === 'object' ? 'an object' : `a ${typeof value}`;
}
export const isInfo = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * A prelude entry point's answer (`text`: the string it returned, null when it returned anything
 * else) as a GuestReply, or an EnvContractError when it is too big or not a reply the host can read.
 */
export function readReply(text: string | null, method: string, limits: SandboxLimits): GuestReply {
  if (text === null || text.length > limits.maxObservationBytes * 4 + 65536) {
    throw new EnvContractError(
      `${method}() returned ${text !== null ? 'too much data' : 'something that is not JSON'}; return plain strings, numbers, booleans, arrays and objects.`,
      { method },
    );
  }
  let reply: unknown;
  try {
    reply = JSON.parse(text);
  } catch {
    reply = undefined;
  }
  // step's fast path answers a well-formed 5-tuple bare, as a JSON array; every other reply is a record
  if (Array.isArray(reply)) return { ok: true, value: reply };
  const r = reply as GuestReply | undefined;
  const wellFormed =
    isInfo(r) &&
    (r.ok === true
      ? 'value' in r
      : r.ok === false && isInfo(r.error) && typeof r.error.name === 'string' && typeof r.error.message === 'string');
  if (!wellFormed) {
    throw new EnvContractError(
      `${method}() returned data the host cannot read (were JSON, Object.prototype or Array.prototype changed?). Return plain data and leave built-ins alone.`,
      { method },
    );
  }
  if (r!.ok && r!.nonFinite !== undefined) r!.value = restoreNonFinite(r!.value, r!.nonFinite);
  return r!;
}

/** reset()'s value as [observation, info], or an EnvContractError saying what it returned. */
export function resetResult(v: unknown, limits: SandboxLimits): ResetResult {
  if (!Array.isArray(v) || v.length !== 2 || typeof v[0] !== 'string' || !isInfo(v[1])) {
    throw new EnvContractError(
      `reset(seed) must return [observation, info] with a string and an object, e.g. \`return [text, {}];\` — it returned ${describe(v)}${Array.isArray(v) ? ` (${v.map(describe).join(', ')})` : ''}.`,
      { method: 'reset' },
    );
  }
  checkObservation(v[0], limits, 'reset');
  return [v[0], v[1]];
}

/** step()'s value as the 5-tuple, or an EnvContractError listing every field that is wrong. */
export function stepResult(v: unknown, limits: SandboxLimits): StepResult {
  if (
    Array.isArray(v) &&
    v.length === 5 &&
    typeof v[0] === 'string' &&
    typeof v[1] === 'number' &&
    v[1] >= -1 &&
    v[1] <= 1 &&
    typeof v[2] === 'boolean' &&
    typeof v[3] === 'boolean' &&
    isInfo(v[4])
  ) {
    checkObservation(v[0], limits, 'step');
    return v as StepResult;
  }
  if (!Array.isArray(v) || v.length !== 5) {
    throw new EnvContractError(
      `step(action) must return [observation, reward, terminated, truncated, info]; it returned ${describe(v)}. Every code path must return all five.`,
      { method: 'step' },
    );
  }
  const [obs, reward, terminated, truncated, info] = v as unknown[];
  const problems: string[] = [];
  if (typeof obs !== 'string') problems.push(`observation must be a string, got ${describe(obs)}`);
  if (typeof reward !== 'number' || !Number.isFinite(reward))
    problems.push(`reward must be a finite number, got ${describe(reward)}`);
  else if (reward < -1 || reward > 1) problems.push(`reward must be within [-1, 1], got ${reward}`);
  if (typeof terminated !== 'boolean') problems.push(`terminated must be a boolean, got ${describe(terminated)}`);
  if (typeof truncated !== 'boolean') problems.push(`truncated must be a boolean, got ${describe(truncated)}`);
  if (!isInfo(info)) problems.push(`info must be an object, got ${describe(info)}`);
  if (problems.length) {
    throw new EnvContractError(`step() returned a malformed result: ${problems.join('; ')}.`, {
      method: 'step',
      problems,
    });
  }
  throw new EnvContractError('step() returned a malformed result.', { method: 'step' }); // not reached
}

/** solution()'s value as a list of actions (a single string becomes a one-item list). */
export function solutionResult(v: unknown): string[] {
  if (typeof v === 'string') return [v];
  if (!Array.isArray(v) || !v.every((a) => typeof a === 'string')) {
    throw new EnvContractError(
      `solution() must return a list of action strings (e.g. ["\\\\boxed{3}", "\\\\boxed{left}"]); it returned ${describe(v)}.`,
      { method: 'solution' },
    );
  }
  return v as string[];
}
