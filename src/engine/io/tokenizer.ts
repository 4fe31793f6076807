/**
 * Tokenizer and chat template for a checkpoint, from its `tokenizer.json` (the Hugging Face
 * `tokenizers` format, run by @huggingface/tokenizers) and `tokenizer_config.json` (special tokens
 * and the Jinja `chat_template`, rendered by @huggingface/jinja).
 *
 *   const tok = TextTokenizer.fromJson(tokenizerJson, tokenizerConfig);
 *   const prompt = tok.applyChatTemplate(messages);          // add_generation_prompt = true
 *   const ids = tok.encode(prompt, { addSpecialTokens: false }); // the template already has BOS
 *
 * The chat template may also come from a separate `chat_template.jinja` file (newer repos); pass
 * it as `chatTemplate`.
 *
 * Both files are untrusted: the template renders within TEMPLATE_LIMITS (steps, value sizes, time;
 * checked once at load on a one-message chat, and on every render), and every regular expression
 * of tokenizer.json is screened before compiling (length, count, nested quantifiers), each with a
 * ModelLoadError naming the file and what it found.
 */
import { Environment, Interpreter, Template } from '@huggingface/jinja';
import { Tokenizer } from '@huggingface/tokenizers';
import { ModelLoadError } from '../../core/errors.ts';

export interface ChatMessage {
  role: string;
  content: string;
}

export interface ChatTemplateOptions {
  /** End with the assistant turn's opening (default true). */
  addGenerationPrompt?: boolean;
  /** Extra template variables (e.g. `{ enable_thinking: false }` for Qwen3). */
  extra?: Record<string, unknown>;
}

type Json = Record<string, unknown>;
const isObj = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

/** A special token in tokenizer_config.json: a string or an AddedToken object `{content, ...}`. */
function tokenText(v: unknown): string | null {
  if (typeof v === 'string') return v;
  if (isObj(v) && typeof v.content === 'string') return v.content;
  return null;
}

/** The template text from tokenizer_config.chat_template (a string, or a list of named templates). */
export function chatTemplateFromConfig(config: unknown, name = 'default'): string | null {
  if (!isObj(config)) return null;
  const t = config.chat_template;
  if (typeof t === 'string') return t;
  if (Array.isArray(t)) {
    const named = t.filter(
      (e): e is { name: string; template: string } =>
        isObj(e) && typeof e.name === 'string' && typeof e.template === 'string',
    );
    return (named.find((e) => e.name === name) ?? named[0])?.template ?? null;
  }
  return null;
}

/** Where a chat template came from, for messages. */
const CONFIG_TEMPLATE_SOURCE = 'tokenizer_config.json chat_template';
const JINJA_TEMPLATE_SOURCE = 'chat_template.jinja';

/**
 * Bounds on one render of a chat template, which is code from the checkpoint. Real templates take
 * some tens of steps per message (Qwen3's: ~80 with its two loops) and make each string once;
 * these allow thousands of messages filling a 128k-token context, and stop a hostile template
 * (endless loops, doubling strings or lists) within about a second and some tens of MB.
 */
export const TEMPLATE_LIMITS = {
  /** Template source characters. */
  sourceChars: 1 << 20,
  /** Steps: one per syntax-tree node evaluated, per item range() makes, loopItemSteps per loop item. */
  steps: 500_000,
  /** Steps per item a for loop walks (the library builds a scope and a `loop` object for each). */
  loopItemSteps: 10,
  /** Characters in any one string. */
  stringChars: 1 << 22,
  /** Items in any one list or mapping. */
  listItems: 1 << 16,
  /** Characters of all strings made, added up (bounds what loops accumulate). */
  totalChars: 1 << 26,
  /** Items of all lists made, added up. */
  totalItems: 1 << 22,
  /** Wall-clock milliseconds (a backstop for steps that are slow on big values). */
  ms: 3000,
};

/** A render ran past TEMPLATE_LIMITS (thrown inside the interpreter, turned into ModelLoadError). */
class TemplateLimitError extends Error {
  constructor(
    message: string,
    /** The limit that fired (a key of TEMPLATE_LIMITS), so a caller can tell work from time. */
    readonly limit: keyof typeof TEMPLATE_LIMITS,
    /** The steps counted when it fired. */
    readonly steps: number,
  ) {
    super(message);
  }
}

type Statement = Parameters<Interpreter['evaluate']>[0];
type RuntimeValue = ReturnType<Interpreter['evaluate']>;

/**
 * The library's interpreter, charging the work of every node it evaluates against
 * TEMPLATE_LIMITS: steps, the size of each value made (each counted once: a variable read
 * again returns the same value object), and the time.
 */
class BoundedInterpreter extends Interpreter {
  private steps = 0;
  private calls = 0;
  private chars = 0;
  private items = 0;
  private readonly deadline = performance.now() + TEMPLATE_LIMITS.ms;
  /** Values already counted. */
  private readonly seen = new WeakSet<object>();
  /** Expressions a for loop iterates over (their value's length is charged per item). */
  private readonly iterables = new WeakSet<object>();

  /** Count n steps of work. */
  charge(n: number): void {
    if ((this.steps += n) > TEMPLATE_LIMITS.steps)
      throw new TemplateLimitError(
        `it took more than ${TEMPLATE_LIMITS.steps.toLocaleString('en')} steps`,
        'steps',
        this.steps,
      );
    if ((++this.calls & 255) === 0 && performance.now() > this.deadline)
      throw new TemplateLimitError(`it ran for more than ${TEMPLATE_LIMITS.ms} ms`, 'ms', this.steps);
  }

  override evaluate(statement: Statement, environment: Environment): RuntimeValue {
    this.charge(1);
    if (statement?.type === 'For') {
      const iterable = (statement as unknown as { iterable: { type: string; lhs?: object } }).iterable;
      this.iterables.add(iterable.type === 'SelectExpression' && iterable.lhs ? iterable.lhs : iterable);
    }
    const v = super.evaluate(statement, environment);
    const x: unknown = v.value;
    const n = Array.isArray(x) ? x.length : x instanceof Map ? x.size : 0;
    if (statement && this.iterables.has(statement)) this.charge(n * TEMPLATE_LIMITS.loopItemSteps);
    if (this.seen.has(v)) return v;
    this.seen.add(v);
    if (typeof x === 'string') {
      if (x.length > TEMPLATE_LIMITS.stringChars)
        throw new TemplateLimitError(
          `it made a string of ${x.length.toLocaleString('en')} characters`,
          'stringChars',
          this.steps,
        );
      if ((this.chars += x.length) > TEMPLATE_LIMITS.totalChars)
        throw new TemplateLimitError(
          `it made more than ${TEMPLATE_LIMITS.totalChars.toLocaleString('en')} characters`,
          'totalChars',
          this.steps,
        );
    } else if (n > TEMPLATE_LIMITS.listItems) {
      throw new TemplateLimitError(`it made a list of ${n.toLocaleString('en')} items`, 'listItems', this.steps);
    } else if ((this.items += n) > TEMPLATE_LIMITS.totalItems) {
      throw new TemplateLimitError(
        `it made more than ${TEMPLATE_LIMITS.totalItems.toLocaleString('en')} list items`,
        'totalItems',
        this.steps,
      );
    }
    return v;
  }
}

/** Python's range(), charging its items to `interp` before making them. */
function boundedRange(interp: BoundedInterpreter) {
  return (start: number, stop?: number, step = 1): number[] => {
    if (stop === undefined) [start, stop] = [0, start];
    if (![start, stop, step].every(Number.isFinite)) throw new Error('range() takes finite numbers');
    if (step === 0) throw new Error('range() step must not be zero');
    const n = Math.max(0, Math.ceil((stop - start) / step));
    interp.charge(n);
    return Array.from({ length: n }, (_, i) => start + i * step);
  };
}

// strftime_now as the library defines it, called through a template of its own.
const strftimeTemplate = new Template('{{ strftime_now(format) }}');
const strftimeNow = (format: unknown): string => strftimeTemplate.render({ format: String(format) });

/** Parse a chat template; ModelLoadError naming `source` when it is too long or does not parse. */
function parseChatTemplate(template: string, source = CONFIG_TEMPLATE_SOURCE): Template {
  if (template.length > TEMPLATE_LIMITS.sourceChars)
    throw new ModelLoadError(
      `The chat template (${source}) is ${template.length.toLocaleString('en')} characters, over the ${TEMPLATE_LIMITS.sourceChars.toLocaleString('en')} accepted; use the checkpoint's original template.`,
      { code: 'template-limit', file: source, limit: 'sourceChars' },
    );
  try {
    return new Template(template);
  } catch (err) {
    throw new ModelLoadError(`The chat template does not parse (${source}): ${(err as Error).message}`, {
      code: 'bad-template',
      file: source,
    });
  }
}

/**
 * Render a chat template (Jinja) with the variables transformers passes, within TEMPLATE_LIMITS.
 * ModelLoadError naming `source` when it does not parse, fails, or runs past a limit (data.limit names
 * the TEMPLATE_LIMITS key that fired, data.steps the steps counted by then).
 */
export function renderChatTemplate(
  template: string | Template,
  messages: readonly ChatMessage[],
  specials: { bos_token?: string | null; eos_token?: string | null } = {},
  opts: ChatTemplateOptions = {},
  source = CONFIG_TEMPLATE_SOURCE,
): string {
  const compiled = typeof template === 'string' ? parseChatTemplate(template, source) : template;
  // Template.render's environment, with range() bounded and every evaluation counted
  const env = new Environment();
  const interp = new BoundedInterpreter(env);
  const globals: Record<string, unknown> = {
    false: false,
    true: true,
    none: null,
    False: false,
    True: true,
    None: null,
    raise_exception: (message: unknown) => {
      throw new Error(String(message));
    },
    range: boundedRange(interp),
    strftime_now: strftimeNow,
    messages: messages.map((m) => ({ ...m })),
    add_generation_prompt: opts.addGenerationPrompt ?? true,
    bos_token: specials.bos_token ?? '',
    eos_token: specials.eos_token ?? '',
    ...opts.extra,
  };
  for (const [k, v] of Object.entries(globals)) env.set(k, v);
  try {
    return interp.run(compiled.parsed).value as string;
  } catch (err) {
    if (err instanceof TemplateLimitError)
      throw new ModelLoadError(
        `The chat template (${source}) was stopped: ${err.message}. A chat template should only format the messages; use the checkpoint's original template.`,
        { code: 'template-limit', file: source, limit: err.limit, steps: err.steps },
      );
    throw new ModelLoadError(`The chat template failed to render (${source}): ${(err as Error).message}`, {
      code: 'template-error',
      file: source,
    });
  }
}

/** Bounds on the regular expressions a tokenizer.json may carry (Split, Replace patterns). */
const TOKENIZER_REGEX_LIMITS = {
  /** Characters per pattern (real pre-tokenizer patterns are a few hundred). */
  chars: 2048,
  /** Patterns in one tokenizer.json. */
  count: 64,
};

/** Length of the quantifier at s[i] ("*", "+", "?", "{n}", "{n,}", "{n,m}"), 0 if none; whether it repeats (can match twice). */
function quantifierAt(s: string, i: number): { len: number; repeats: boolean } {
  const c = s[i];
  if (c === '*' || c === '+') return { len: 1, repeats: true };
  if (c === '?') return { len: 1, repeats: false };
  const m = c === '{' ? /^\{(\d+)(,(\d*))?\}/.exec(s.slice(i, i + 24)) : null;
  if (!m) return { len: 0, repeats: false };
  const max = m[2] === undefined ? Number(m[1]) : m[3] === '' ? Infinity : Number(m[3]);
  return { len: m[0].length, repeats: max > 1 };
}

/**
 * Why a pattern could backtrack catastrophically, or null: a group repeated by *, + or {n,m} whose
 * body has a quantifier ((a+)+, (a*)*, (a?){30}) or an alternation ((a|a)*). Real tokenizer
 * patterns repeat only characters and character classes, which stay linear per match attempt.
 */
export function regexHazard(pattern: string): string | null {
  const stack: { quant: boolean; alt: boolean }[] = [{ quant: false, alt: false }];
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i]!;
    const top = stack[stack.length - 1]!;
    if (c === '\\') {
      i++;
      // \p{..}, \u{..}, \x{..}: the braces belong to the escape
      if ('pPux'.includes(pattern[i] ?? '') && pattern[i + 1] === '{') i = Math.max(i, pattern.indexOf('}', i));
      continue;
    }
    if (c === '[') {
      for (i++; i < pattern.length && pattern[i] !== ']'; i++) if (pattern[i] === '\\') i++;
      continue;
    }
    if (c === '(') {
      stack.push({ quant: false, alt: false });
      if (pattern[i + 1] === '?') {
        // (?:  (?=  (?!  (?<=  (?<!  (?<name>  (?i:  — the "?" is not a quantifier; stop on the prefix's last character
        i += 2;
        if (pattern[i] === '<') i = pattern[i + 1] === '=' || pattern[i + 1] === '!' ? i + 1 : pattern.indexOf('>', i);
        else if (!':=!'.includes(pattern[i] ?? ':')) {
          while (i < pattern.length && /[a-zA-Z-]/.test(pattern[i]!)) i++;
          if (pattern[i] !== ':') i--; // "(?i)": the ")" closes the group
        }
        if (i < 0) break;
      }
      continue;
    }
    if (c === '|') {
      top.alt = true;
      continue;
    }
    if (c === ')' && stack.length > 1) {
      const group = stack.pop()!;
      const parent = stack[stack.length - 1]!;
      const q = quantifierAt(pattern, i + 1);
      if (q.repeats && group.quant) return 'a repeated group holds a quantifier (nested quantifiers, like (a+)+)';
      if (q.repeats && group.alt) return 'a repeated group holds an alternation (like (a|ab)*)';
      parent.quant ||= group.quant || q.len > 0;
      parent.alt ||= group.alt;
      continue;
    }
    if (quantifierAt(pattern, i).len > 0) top.quant = true;
  }
  return null;
}

/**
 * Check every regular expression of a tokenizer.json (any `{"Regex": "..."}` under normalizer,
 * pre_tokenizer, post_processor or decoder) before it is compiled: ModelLoadError naming the
 * pattern's place and text when one is too long, too many, or can backtrack catastrophically.
 */
function screenTokenizerRegexes(tokenizerJson: Json): void {
  const found: { path: string; pattern: unknown }[] = [];
  const stack: { path: string; v: unknown }[] = ['normalizer', 'pre_tokenizer', 'post_processor', 'decoder'].map(
    (k) => ({ path: k, v: tokenizerJson[k] }),
  );
  while (stack.length > 0) {
    const { path, v } = stack.pop()!;
    if (typeof v !== 'object' || v === null) continue;
    for (const [k, x] of Object.entries(v)) {
      if (k === 'Regex') found.push({ path: `${path}.Regex`, pattern: x });
      else stack.push({ path: Array.isArray(v) ? `${path}[${k}]` : `${path}.${k}`, v: x });
    }
  }
  const fail = (why: string, f?: { path: string; pattern: unknown }) => {
    const shown = f && String(f.pattern).length > 200 ? `${String(f.pattern).slice(0, 200)}…` : String(f?.pattern);
    return new ModelLoadError(
      `tokenizer.json ${f ? `${f.path} ${JSON.stringify(shown)}` : ''}: ${why}. Use the checkpoint's original tokenizer.json.`,
      { code: 'bad-tokenizer-regex', file: 'tokenizer.json', ...(f ? { path: f.path } : {}) },
    );
  };
  if (found.length > TOKENIZER_REGEX_LIMITS.count)
    throw fail(`it has ${found.length} regular expressions, more than the ${TOKENIZER_REGEX_LIMITS.count} accepted`);
  for (const f of found) {
    if (typeof f.pattern !== 'string') throw fail('the pattern is not a string', f);
    if (f.pattern.length > TOKENIZER_REGEX_LIMITS.chars)
      throw fail(
        `the pattern is ${f.pattern.length} characters, more than the ${TOKENIZER_REGEX_LIMITS.chars} accepted`,
        f,
      );
    const hazard = regexHazard(f.pattern);
    if (hazard) throw fail(`${hazard}, which can take exponential time on some text (catastrophic backtracking)`, f);
  }
}

export class TextTokenizer {
  readonly bosToken: string | null;
  readonly eosToken: string | null;
  readonly bosTokenId: number | null;
  readonly eosTokenId: number | null;
  /** The Jinja chat template, or null when the checkpoint has none. */
  readonly chatTemplate: string | null;
  /** Where the template came from (tokenizer_config.json or chat_template.jinja), for messages. */
  readonly chatTemplateSource: string;
  /** The parsed template; undefined until first used, null when it does not parse (render says why). */
  private compiled: Template | null | undefined;

  private constructor(
    private readonly tok: Tokenizer,
    config: Json,
    chatTemplate: string | null,
    chatTemplateSource: string,
  ) {
    this.bosToken = tokenText(config.bos_token);
    this.eosToken = tokenText(config.eos_token);
    this.bosTokenId = this.bosToken === null ? null : (tok.token_to_id(this.bosToken) ?? null);
    this.eosTokenId = this.eosToken === null ? null : (tok.token_to_id(this.eosToken) ?? null);
    this.chatTemplate = chatTemplate;
    this.chatTemplateSource = chatTemplateSource;
  }

  /**
   * The load-time check of the chat template: too long → ModelLoadError; one user message rendered
   * within TEMPLATE_LIMITS, a template running past them → ModelLoadError. A template that does not
   * parse or raises is left for use to report, as before (models without chat use still load).
   */
  private screenTemplate(): void {
    if (this.chatTemplate === null) return;
    try {
      this.applyChatTemplate([{ role: 'user', content: 'Hello.' }]);
    } catch (err) {
      if (err instanceof ModelLoadError && err.data.code === 'template-limit') throw err;
    }
  }

  /**
   * Build from parsed `tokenizer.json` and `tokenizer_config.json` (objects or JSON text).
   * `chatTemplate` overrides the config's template (e.g. from chat_template.jinja).
   */
  static fromJson(tokenizerJson: unknown, tokenizerConfig: unknown = {}, chatTemplate?: string | null): TextTokenizer {
    const parse = (v: unknown, what: string): unknown => {
      if (typeof v !== 'string') return v;
      try {
        return JSON.parse(v);
      } catch (err) {
        throw new ModelLoadError(`${what} is not valid JSON: ${(err as Error).message}`);
      }
    };
    const tj = parse(tokenizerJson, 'tokenizer.json');
    const tc = parse(tokenizerConfig, 'tokenizer_config.json') ?? {};
    if (!isObj(tj) || !isObj(tj.model))
      throw new ModelLoadError('tokenizer.json has no "model" section; is it a Hugging Face tokenizers file?');
    if (!isObj(tc)) throw new ModelLoadError('tokenizer_config.json must be a JSON object');
    screenTokenizerRegexes(tj);
    let tok: Tokenizer;
    try {
      tok = new Tokenizer(tj, tc);
    } catch (err) {
      throw new ModelLoadError(`tokenizer.json could not be loaded: ${(err as Error).message}`);
    }
    const tokenizer =
      chatTemplate !== undefined && chatTemplate !== null
        ? new TextTokenizer(tok, tc, chatTemplate, JINJA_TEMPLATE_SOURCE)
        : new TextTokenizer(tok, tc, chatTemplateFromConfig(tc), CONFIG_TEMPLATE_SOURCE);
    tokenizer.screenTemplate();
    return tokenizer;
  }

  /** Token ids of `text`. addSpecialTokens (default true) applies the post-processor (e.g. BOS). */
  encode(text: string, opts: { addSpecialTokens?: boolean } = {}): number[] {
    return this.tok.encode(text, { add_special_tokens: opts.addSpecialTokens ?? true }).ids;
  }

  /** Token strings of `text` (no special tokens added). */
  tokenize(text: string): string[] {
    return this.tok.tokenize(text, { add_special_tokens: false });
  }

  decode(ids: readonly number[], opts: { skipSpecialTokens?: boolean } = {}): string {
    return this.tok.decode([...ids], { skip_special_tokens: opts.skipSpecialTokens ?? false });
  }

  tokenId(token: string): number | undefined {
    return this.tok.token_to_id(token);
  }

  idToToken(id: number): string | undefined {
    return this.tok.id_to_token(id);
  }

  /** Number of entries in the vocabulary, added tokens included. */
  get vocabSize(): number {
    return this.tok.get_vocab(true).size;
  }

  /** Ids of all special added tokens (e.g. <|im_start|>, <|im_end|>). */
  specialTokenIds(): number[] {
    return [...this.tok.get_added_tokens_decoder().entries()].filter(([, t]) => t.special).map(([id]) => id);
  }

  /** Render the checkpoint's chat template. Throws ModelLoadError when there is none. */
  applyChatTemplate(messages: readonly ChatMessage[], opts: ChatTemplateOptions = {}): string {
    if (!this.chatTemplate)
      throw new ModelLoadError('This tokenizer has no chat template (tokenizer_config.json has no chat_template)');
    if (this.compiled === undefined) {
      try {
        this.compiled = parseChatTemplate(this.chatTemplate, this.chatTemplateSource);
      } catch {
        this.compiled = null;
      }
    }
    return renderChatTemplate(
      this.compiled ?? this.chatTemplate,
      messages,
      { bos_token: this.bosToken, eos_token: this.eosToken },
      opts,
      this.chatTemplateSource,
    );
  }

  /** Template → ids, without adding special tokens again (the template places BOS itself). */
  encodeChat(messages: readonly ChatMessage[], opts: ChatTemplateOptions = {}): number[] {
    return this.encode(this.applyChatTemplate(messages, opts), { addSpecialTokens: false });
  }
}
