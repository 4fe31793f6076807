#!/usr/bin/env node
// A pre-registration's held-out runs (round 4 on) into the file the Lab panel shows them from: reads the last
// line of `spade lab compare --space climb --combine … --json` (its JSON object) and writes
// src/core/lab/measured_prereg{N}.json — { space, command, seeds, cycles, screenedOut, screens, settings, runs } with
// the runs exactly as the command printed them (never edited). The panel loads that file when it opens
// (state/lab.svelte.ts loadPrereg), so the page's first load does not carry the 400-cycle runs.
//
// Usage: node scripts/lab_measured.js COMBINED.json [--prereg 4|5] [--out PATH] [--command TEXT]
//   COMBINED.json  stdout of `spade lab compare --space climb --combine a.txt b.txt … --json`
//   --prereg       which pre-registration the runs are (default 4): names the file and the command recorded
//   --out          where to write (default src/core/lab/measured_prereg{N}.json)
//   --command      the command recorded with the runs (default: that pre-registration's parts' command)
import { readFileSync, writeFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

/** Per pre-registration: the file the panel loads, and the command its held-out parts were run with. */
export const PREREGS = {
  4: {
    out: 'src/core/lab/measured_prereg4.json',
    command: 'spade lab compare --space climb --seeds 71-75 (and 76-80) --json, then --combine',
  },
  5: {
    out: 'src/core/lab/measured_prereg5.json',
    command: 'spade lab compare --space climb --prereg 5 --seeds 101-105 (and 106-110) --json, then --combine',
  },
};

/**
 * The measured entry from a compare output's text: its last line must be the JSON object with `runs`
 * on the climb; seeds (run or screened out) are written as a range when they are consecutive.
 * @param {string} text
 * @param {string} command
 */
export function measuredEntry(text, command = PREREGS[4].command) {
  const last = text.trim().split('\n').at(-1) ?? '';
  let out;
  try {
    out = JSON.parse(last);
  } catch {
    throw new Error('the last line is not JSON: give the stdout of `spade lab compare --combine … --json`');
  }
  if (!Array.isArray(out.runs) || !out.runs.length) throw new Error('the output has no runs');
  if (out.space !== 'climb') throw new Error(`the runs are on ${String(out.space)}, not the climb`);
  // the held-out seeds: those run and those the dead-seed screen left out
  const seeds = [...new Set([...out.runs.map((r) => r.seed), ...(out.screenedOut ?? [])])].sort((a, b) => a - b);
  const range =
    seeds.length > 1 && seeds.at(-1) - seeds[0] === seeds.length - 1 ? `${seeds[0]}–${seeds.at(-1)}` : seeds.join(', ');
  return {
    space: 'climb',
    command,
    seeds: range,
    cycles: out.cycles,
    screenedOut: out.screenedOut ?? [],
    screens: out.screens ?? [],
    settings: out.settings ?? null,
    runs: out.runs,
  };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const args = process.argv.slice(2);
  const opt = (name) => {
    const i = args.indexOf(name);
    return i < 0 ? undefined : args.splice(i, 2)[1];
  };
  const n = opt('--prereg') ?? '4';
  const prereg = Object.hasOwn(PREREGS, n) ? PREREGS[n] : null;
  const out = opt('--out') ?? prereg?.out;
  const command = opt('--command') ?? prereg?.command;
  if (args.length !== 1 || !prereg) {
    console.error(
      `usage: node scripts/lab_measured.js COMBINED.json [--prereg ${Object.keys(PREREGS).join('|')}] [--out PATH] [--command TEXT]`,
    );
    process.exit(2);
  }
  try {
    const entry = measuredEntry(readFileSync(args[0], 'utf8'), command);
    writeFileSync(out, `${JSON.stringify(entry)}\n`);
    console.log(`${out}: ${entry.runs.length} runs, seeds ${entry.seeds}, ${entry.cycles} cycles`);
  } catch (err) {
    console.error(`lab_measured: ${err instanceof Error ? err.message : String(err)}`);
    process.exit(1);
  }
}
