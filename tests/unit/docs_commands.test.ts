// The docs as code: every command line of README.md and docs/*.md (```sh and ```bash blocks, lines
// joined at a trailing "\", comments dropped; shell-quote parses them) is
// - checked, when it is a `spade` command (or a synopsis line starting with `spade` in any block):
//   the command and subcommand exist and every --flag it names is one the command's --help declares,
//   so a flag renamed in the code and not in the docs fails here;
// - run, here, with exit 0 — unless SKIP names it, with the reason (weights, a network, a model server,
//   minutes of work, a server that runs until stopped, a synopsis with placeholders). Every line is
//   one or the other, and every SKIP entry still matches a line, so a new command in the docs is run
//   or consciously skipped.
// Runs are in a scratch folder per document (src/ linked in, `npx spade` → `node bin/spade.js`); the
// user's files a command names (my_env.js) are made there; http://127.0.0.1:8000/v1 (a vLLM or any
// OpenAI-compatible server in the docs) is a stand-in server that answers as the test doubles do.
import { spawn } from 'node:child_process';
import { copyFile, mkdir, mkdtemp, readFile, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse, quote, type ParseEntry } from 'shell-quote';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../../src/cli/spade.ts';
import type { ChatMessage } from '../../src/core/llm/chat_model.ts';
import { scriptedTrio } from '../../src/core/llm/scripted_models.ts';
import { startFakeOpenAI, type FakeServer } from '../helpers/fake_openai_server.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const DOCS = [
  'README.md',
  'docs/architecture.md',
  'docs/benchmarks.md',
  'docs/engine.md',
  'docs/environments.md',
  'docs/lab.md',
  'docs/loop.md',
  'docs/models.md',
  'docs/recipes.md',
  'docs/scale-out.md',
  'docs/teaching.md',
  'docs/testing.md',
  'docs/training.md',
];

/** Commands not run here, each with the reason; each must match at least one line of the docs. */
const SKIP: { match: RegExp; why: string }[] = [
  {
    match: /^npm ci && npm start$/,
    why: 'installs, then serves the app until stopped (the e2e tier builds and serves it)',
  },
  { match: /^npm test$/, why: 'CI itself (15+ minutes), which runs this file' },
  {
    match: /^npm ci && npm run build$/,
    why: "installs, then builds dist/: npm test's build tier; static_host.test.ts serves that dist/ under /spade/ and /",
  },
  { match: /^export OPENAI_API_KEY=/, why: 'sets a variable for the commands after it' },
  {
    match: /api\.openai\.com/,
    why: 'a hosted API: the network and a paid key (run_defaults.test.ts checks the key is asked for)',
  },
  { match: /127\.0\.0\.1:(11434|8080|8001)\b/, why: 'needs Ollama, llama.cpp or vLLM serving a model (weights)' },
  {
    match: /^(ollama |OLLAMA_ORIGINS=|vllm serve |VLLM_ALLOW_RUNTIME_LORA_UPDATING=|llama-server )/,
    why: 'a model server with weights',
  },
  {
    match: /--backend local --model-dir models\/tiny --train/,
    why: 'minutes per cycle on a CPU at the default settings; run_train.test.ts and run_interrupt.test.ts run it with small ones',
  },
  { match: /spade lab compare --seeds 1-3/, why: "minutes of CPU: the Lab's tests run compare at small budgets" },
  {
    match: /spade lab compare --space climb --prereg 5 --seeds 101 /,
    why: "a pre-registered comparison: 400 cycles for each of four arms, over ten minutes (lab_compare.test.ts checks --prereg 5's arms and settings)",
  },
  {
    match: /spade bench lab --json/,
    why: "about 90 s idle, minutes under load: the Lab's fast-path benchmark, four rounds of both paths (docs/benchmarks.md records its runs)",
  },
  {
    match: /spade serve\b/,
    why: 'listens until stopped; serve.test.ts, serve_hostile.test.ts and serve_python.test.ts run it',
  },
  {
    match: /accelerate launch train_spade\.py/,
    why: 'a GPU trainer (TRL, vLLM); scale_out_doc.test.ts runs its environment classes',
  },
  { match: /\[--|\bDIR\b/, why: 'a synopsis with placeholders, not a command (its flags are checked)' },
  {
    match:
      /^(node scripts\/device\/|node --import \.\/bin\/ts_loader\.js scripts\/device\/|node \.dev\/|python3 scripts\/device\/|npm run gpu-bench:prepare|GPU_BENCH_TINY=|bash gpu_bench\.sh)/,
    why: "the GPU machine's workflow (docs/benchmarks.md): bundles, then runs on a device",
  },
];

interface DocLine {
  doc: string;
  /** The command as written, without its comment. */
  text: string;
  tokens: ParseEntry[];
  /** From a ```sh or ```bash block (run or skipped), or a synopsis in another block (checked only). */
  shell: boolean;
}

function docLines(doc: string, md: string): DocLine[] {
  const out: DocLine[] = [];
  for (const m of md.matchAll(/^```(\w*)\n([\s\S]*?)^```/gm)) {
    const shell = m[1] === 'sh' || m[1] === 'bash';
    for (const raw of m[2]!.replace(/\\\n\s*/g, ' ').split('\n')) {
      const tokens = parse(raw.trim()).filter((t) => !(typeof t === 'object' && 'comment' in t));
      const text = raw.replace(/\s+#\s.*$/, '').trim();
      if (!tokens.length) continue;
      if (shell || /^(npx )?spade /.test(text))
        out.push({ doc, text: shell ? text : text.replace(/^npx /, ''), tokens, shell });
    }
  }
  return out;
}

/** The words after `spade` up to the first operator, or null when the line runs no spade command. */
function spadeArgs(tokens: ParseEntry[]): string[] | null {
  const i = tokens.findIndex((t, k) => t === 'spade' && (k === 0 || tokens[k - 1] === 'npx'));
  if (i < 0) return null;
  const end = tokens.findIndex((t, k) => k > i && typeof t === 'object' && 'op' in t && t.op !== 'glob');
  return tokens
    .slice(i + 1, end < 0 ? undefined : end)
    .map((t) => (typeof t === 'string' ? t : 'pattern' in t ? t.pattern : ''));
}

async function capture(argv: string[]) {
  const out: string[] = [];
  const code = await main(argv, { out: (l) => out.push(...l.split('\n')), err: () => undefined });
  return { code, out };
}

/** The command words a line names (`run export`) and the flags its --help declares. */
async function declared(args: string[]): Promise<{ words: string[]; flags: Set<string> } | string> {
  const [cmd, sub] = args;
  if (!cmd || cmd.startsWith('-')) return 'no command';
  const top = await capture([cmd, '--help']);
  if (top.code !== 0) return `"spade ${cmd}" is no command`;
  let words = [cmd];
  if (sub && !sub.startsWith('-')) {
    const h = await capture([cmd, sub, '--help']);
    if (h.code === 0 && h.out[0]?.startsWith(`Usage: spade ${cmd} ${sub}`)) words = [cmd, sub];
  }
  const help = (await capture([...words, '--help'])).out;
  const flags = new Set(help.flatMap((l) => /^ {2}(?:-h, )?(--[a-z0-9-]+)/.exec(l)?.[1] ?? []));
  return { words, flags };
}

let lines: DocLine[] = [];
let server: FakeServer;
beforeAll(async () => {
  lines = (await Promise.all(DOCS.map(async (d) => docLines(d, await readFile(join(ROOT, d), 'utf8'))))).flat();
  const trio = scriptedTrio();
  server = await startFakeOpenAI({ reply: async (body) => (await trio.chat(body.messages as ChatMessage[])).text });
});
afterAll(() => server.close());

/** Runs one doc line in `cwd` through bash, `spade` as node bin/spade.js; resolves with the exit code and output. */
function runLine(line: DocLine, cwd: string): Promise<{ code: number | null; output: string }> {
  const words = line.tokens.map((t) => {
    if (typeof t === 'string') return quote([t.replace('http://127.0.0.1:8000/v1', server.url)]);
    return 'op' in t ? (t.op === 'glob' ? t.pattern : t.op) : '';
  });
  const script = words.join(' ').replace(/^(npx )?spade /, `${quote([process.execPath, join(ROOT, 'bin/spade.js')])} `);
  return new Promise((resolve, reject) => {
    const env = { ...process.env };
    delete env.OPENAI_API_KEY;
    const child = spawn('bash', ['-c', script], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, output: output.slice(-3000) }));
  });
}

/** A scratch folder for one document: src/ linked in, the user's files its commands name. */
async function scratch(doc: string): Promise<string> {
  const cwd = await mkdtemp(join(tmpdir(), 'spade-docs-'));
  await symlink(join(ROOT, 'src'), join(cwd, 'src'));
  await copyFile(join(ROOT, 'src/core/env/seeds/lantern_lock.js'), join(cwd, 'my_env.js'));
  if (doc === 'README.md') {
    // what the README's hosted-API run (skipped) would have left: a run directory and its recording
    await mkdir(join(cwd, 'runs'));
    const made = await runLine(
      {
        doc,
        text: '',
        shell: true,
        tokens: parse(
          `spade run --backend openai --base-url http://127.0.0.1:8000/v1 --model m --iterations 1 --out runs/a --record runs/a.jsonl --corpus none --set skillsPerCycle=1 playsPerEnv=1`,
        ),
      },
      cwd,
    );
    expect(made.code, made.output).toBe(0);
  }
  return cwd;
}

describe('the commands of README.md and docs/', { timeout: 600_000 }, () => {
  it('finds them', () => {
    expect(lines.filter((l) => spadeArgs(l.tokens)).length).toBeGreaterThan(40);
    expect(lines.some((l) => l.doc === 'docs/lab.md' && !l.shell)).toBe(true);
  });

  it('every spade command names a command, subcommand and flags the CLI declares', async () => {
    const problems: string[] = [];
    for (const l of lines) {
      const args = spadeArgs(l.tokens);
      if (!args) continue;
      const d = await declared(args);
      if (typeof d === 'string') {
        problems.push(`${l.doc}: ${l.text}: ${d}`);
        continue;
      }
      for (const f of l.text.match(/(?<![\w-])--[a-z][a-z0-9-]*/g) ?? [])
        if (!d.flags.has(f)) problems.push(`${l.doc}: ${l.text}: spade ${d.words.join(' ')} has no flag ${f}`);
    }
    expect(problems).toEqual([]);
  });

  it('every SKIP entry names lines that are in the docs', () => {
    for (const s of SKIP)
      expect(
        lines.some((l) => l.shell && s.match.test(l.text)),
        String(s.match),
      ).toBe(true);
  });

  it('every other command runs here with exit 0', async () => {
    const ran: string[] = [];
    const failed: string[] = [];
    for (const doc of DOCS) {
      const todo = lines.filter((l) => l.doc === doc && l.shell && !SKIP.some((s) => s.match.test(l.text)));
      if (!todo.length) continue;
      const cwd = await scratch(doc);
      for (const l of todo) {
        const r = await runLine(l, cwd);
        ran.push(`${doc}: ${l.text}`);
        if (r.code !== 0) failed.push(`${doc}: ${l.text} → exit ${r.code}\n${r.output}`);
      }
    }
    expect(failed).toEqual([]);
    console.log(`docs commands run (${ran.length}):\n${ran.join('\n')}`);
    // the ones this file is for: a checker, a game, a recorded run replayed and exported, the proofs
    for (const c of [
      'spade validate',
      'spade play',
      'spade run --backend replay',
      'spade run export',
      'spade train toy',
      'spade config show',
    ])
      expect(
        ran.some((r) => r.includes(c)),
        c,
      ).toBe(true);
  });
});
