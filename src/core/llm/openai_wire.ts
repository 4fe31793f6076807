/**
 * Reading an OpenAI-compatible server's reply off the wire (openai_model.ts sends the request): the
 * body as bounded text lines (ReplyReader: the call's abort ends a read at once; a line, an SSE event
 * or a body over its bound is a ModelCallError of kind 'too_large', never a growing buffer), and each
 * chunk's fields type-checked as the chat-completions protocol has them, by TypeBox schemas read
 * through core/wire_schema.ts (readChoice, readLogprobs, readUsage: null is empty; any other wrong
 * type is a ModelCallError of kind 'bad_reply' naming the field, the value and what the protocol
 * has there). Every bound scales with the call's maxReplyChars.
 */
import { Type, type TSchema } from '@sinclair/typebox';
import { abortError, ModelCallError } from '../errors.ts';
import { expected, Wire, type WireRead } from '../wire_schema.ts';
import type { ChatResult, FinishReason, TokenLogprob } from './chat_model.ts';

/** A line (or a non-streamed JSON body) may hold this many characters per reply character (escapes, log-probs) ... */
const LINE_CHARS_PER_REPLY_CHAR = 8;
/** ... plus this much (the JSON around one chunk). One SSE event may hold as much as one line. */
export const LINE_SLACK_CHARS = 1 << 20;
/** `data:` lines in one SSE event (servers send one; SSE allows several). */
export const MAX_EVENT_LINES = 1000;
/** A streamed body may hold this many characters per reply character (one chunk of JSON per token) plus LINE_SLACK_CHARS. */
const BODY_CHARS_PER_REPLY_CHAR = 256;
/** The log-probs kept may total this many characters per reply character, counting LOGPROB_ENTRY_CHARS per entry plus its token. */
export const LOGPROB_CHARS_PER_REPLY_CHAR = 16;
export const LOGPROB_ENTRY_CHARS = 16;

/** One chat.completion.chunk (or a whole chat.completion when a server does not stream): unchecked until read (readChoice). */
export interface WireChunk {
  choices?: unknown;
  usage?: unknown;
  error?: unknown;
}

/** Which size bound a reply broke (ModelCallError data.limit). */
type SizeLimit = 'line' | 'event' | 'event_lines' | 'body' | 'logprobs';

/** Why a call was stopped from our side. */
export type StopCause = 'total' | 'idle' | 'grace' | 'capped' | null;

/**
 * Reads a response body as text lines, bounded: a read ends as soon as `signal` aborts (even if the
 * underlying fetch ignores it), and a line longer than the cap, or a body longer than its cap, is an
 * error, not a growing buffer. Lines are found with indexOf from where the last search stopped, so
 * reading is linear in the body.
 */
export class ReplyReader {
  private readonly reader: ReadableStreamDefaultReader<Uint8Array> | null;
  private readonly decoder = new TextDecoder();
  private readonly aborted: Promise<null>;
  /** The last piece read, and where the next line in it starts. */
  private buf = '';
  private pos = 0;
  /** The start of a line that spans pieces. */
  private partial: string[] = [];
  private partialChars = 0;
  private ended = false;
  /** The longest line (and SSE event, and JSON body), characters. */
  readonly maxLine: number;
  /** The longest body, characters, and how much has been read. */
  private readonly maxBody: number;
  private bodyChars = 0;

  constructor(
    response: Response,
    private readonly signal: AbortSignal,
    maxReplyChars: number,
    private readonly where: string,
    private readonly cause: () => StopCause,
  ) {
    this.reader = response.body?.getReader() ?? null;
    this.maxLine = maxReplyChars * LINE_CHARS_PER_REPLY_CHAR + LINE_SLACK_CHARS;
    this.maxBody = maxReplyChars * BODY_CHARS_PER_REPLY_CHAR + LINE_SLACK_CHARS;
    this.aborted = new Promise<null>((resolve) => {
      if (signal.aborted) resolve(null);
      else signal.addEventListener('abort', () => resolve(null), { once: true });
    });
    signal.addEventListener('abort', () => void this.reader?.cancel().catch(() => undefined), { once: true });
  }

  /** The next piece of the body; null at its end or once the call is stopped. */
  private async chunk(): Promise<string | null> {
    if (this.ended || !this.reader) return null;
    // a read the abort itself broke (the SDK's fetch errors its body stream) is the same end as the abort
    const read = this.reader.read().catch((err: unknown) => {
      if (this.signal.aborted) return null;
      throw err;
    });
    const r = await Promise.race([read, this.aborted]);
    if (r === null || this.signal.aborted) return this.end();
    const text = r.done ? this.decoder.decode() : this.decoder.decode(r.value, { stream: true });
    if (r.done) this.ended = true;
    this.bodyChars += text.length;
    if (this.bodyChars > this.maxBody)
      this.fail('body', `over ${this.maxBody} characters in one reply without finishing it`);
    return text;
  }

  private end(): null {
    this.ended = true;
    const c = this.cause();
    if (c === 'grace' || c === 'capped') return null; // our own end of the reply
    throw abortError(this.signal, 'The model call was stopped.'); // time-outs and the caller's abort: mapped by the caller
  }

  /** The next line if the last piece read holds it whole (no waiting), else undefined. */
  buffered(): string | undefined {
    const nl = this.buf.indexOf('\n', this.pos);
    if (nl < 0) return undefined;
    let whole = this.buf.slice(this.pos, nl);
    if (this.partial.length) {
      whole = this.partial.join('') + whole;
      this.partial = [];
      this.partialChars = 0;
    }
    this.pos = nl + 1;
    if (whole.length > this.maxLine) this.tooLong();
    return whole.charCodeAt(whole.length - 1) === 13 ? whole.slice(0, -1) : whole;
  }

  /** The next line without its line break ("\n" or "\r\n"), or null at the end of the body. */
  async line(): Promise<string | null> {
    for (;;) {
      const whole = this.buffered();
      if (whole !== undefined) return whole;
      // No line break in what is left: keep it aside (no re-scan) and read on.
      if (this.pos < this.buf.length) {
        const rest = this.buf.slice(this.pos);
        this.partial.push(rest);
        this.partialChars += rest.length;
        if (this.partialChars > this.maxLine) this.tooLong();
      }
      this.buf = '';
      this.pos = 0;
      const more = await this.chunk();
      if (more === null || (this.ended && more === '')) {
        if (!this.partialChars) return null;
        const last = this.partial.join('');
        this.partial = [];
        this.partialChars = 0;
        return last;
      }
      this.buf = more;
    }
  }

  /** The whole body (a JSON reply), resetting the idle timer on each piece. */
  async all(touch: () => void): Promise<string> {
    const parts: string[] = [];
    let n = 0;
    for (;;) {
      const more = await this.chunk();
      if (more === null) break;
      touch();
      parts.push(more);
      n += more.length;
      if (n > this.maxLine) this.tooLong();
      if (this.ended) break;
    }
    return parts.join('');
  }

  private tooLong(): never {
    this.fail('line', `over ${this.maxLine} characters without a line break (or as one JSON reply)`);
  }

  private fail(limit: SizeLimit, what: string): never {
    void this.reader?.cancel().catch(() => undefined);
    throw tooLarge(this.where, limit, what);
  }
}

/** A reply over one of its size bounds: what the server sent, and what to do. */
export function tooLarge(where: string, limit: SizeLimit, what: string): ModelCallError {
  return new ModelCallError(
    `The server at ${where} sent ${what}; the reply was dropped. Is the URL an OpenAI-compatible /v1 endpoint? Raise maxReplyChars if replies this long are expected (every size bound on a reply scales with it).`,
    { kind: 'too_large', limit },
  );
}

/** A field of the reply with a type the protocol does not allow, named as the server sent it. */
function badField(where: string, field: string, value: unknown, expected: string): ModelCallError {
  return new ModelCallError(
    `The server at ${where} sent ${field} = ${preview(value, 80)}, where the chat-completions protocol has ${expected}; the reply was dropped. Is it an OpenAI-compatible server? See its logs.`,
    { kind: 'bad_reply', field },
  );
}

/** A value from JSON.parse as JSON, cut to `max` characters; one nested too deep to print is described instead. */
export function preview(value: unknown, max: number): string {
  let s: string;
  try {
    s = JSON.stringify(value) ?? String(value);
  } catch {
    s = `(${Array.isArray(value) ? 'an array' : `a ${typeof value}`} nested too deep to print)`;
  }
  return s.length > max ? `${s.slice(0, max)}…` : s;
}

const isAbsent = (v: unknown): v is null | undefined => v === null || v === undefined;
const orNull = <T extends TSchema>(s: T) => Type.Union([s, Type.Null()]);
const count = () => orNull(Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER }));

// The chat-completions fields read, as the protocol has them (null is legal wherever a field may be absent).
/** A chunk's or reply's choices: only choices[0] is read. */
const CHOICES = new Wire(Type.Object({ choices: Type.Optional(orNull(Type.Array(Type.Unknown()))) }));
/** choices[0] of a streamed chunk (`delta`) or of a whole reply (`message`); logprobs are checked apart, when wanted. */
const choice = <K extends 'delta' | 'message'>(key: K) =>
  new Wire(
    Type.Object({
      [key]: Type.Optional(orNull(Type.Object({ content: Type.Optional(orNull(Type.String())) }))),
      finish_reason: Type.Optional(orNull(Type.String())),
      logprobs: Type.Optional(Type.Unknown()),
    }),
  );
const CHOICE = { delta: choice('delta'), message: choice('message') };
/** choices[0].logprobs: its content as {token, logprob} entries. */
const LOGPROBS = new Wire(
  orNull(
    Type.Object({
      content: Type.Optional(orNull(Type.Array(Type.Object({ token: Type.String(), logprob: Type.Number() })))),
    }),
  ),
);
/** The usage object: token counts. */
const USAGE = new Wire(
  orNull(Type.Object({ prompt_tokens: Type.Optional(count()), completion_tokens: Type.Optional(count()) })),
);

/** `at` followed by an issue's path, as the protocol's docs write it: `choices[0].delta.content`. */
function fieldName(at: string, loc: (string | number)[]): string {
  return loc.reduce<string>((name, k) => (typeof k === 'number' ? `${name}[${k}]` : name ? `${name}.${k}` : k), at);
}

/** A read's value, or a ModelCallError naming its first bad field (`at` is where the value sits in the reply). */
function checked<T>(r: WireRead<T>, at: string, where: string): T {
  if (r.ok) return r.value;
  const i = r.issues[0]!;
  throw badField(where, fieldName(at, i.loc) || 'the reply', i.value, expected(i.schema));
}

/** What a call reads from choices[0] of one chunk or whole reply. */
interface ReadChoice {
  content: string;
  finishReason: string | null;
  logprobs: TokenLogprob[];
}

/**
 * choices[0] of a chunk (`key` 'delta') or a whole reply ('message'), type-checked: absent or null is
 * empty; any other wrong type is a ModelCallError naming the field. Log-probs are read only when wanted.
 * Null when there is no choice (a usage-only chunk).
 */
export function readChoice(
  chunk: WireChunk,
  key: 'delta' | 'message',
  wantLogprobs: boolean,
  where: string,
): ReadChoice | null {
  const choices = checked(CHOICES.read(chunk, 1), '', where).choices;
  const c: unknown = choices?.[0];
  if (isAbsent(c)) return null;
  const ch = checked(CHOICE[key].read(c, 1), 'choices[0]', where) as {
    [k in typeof key]?: { content?: string | null } | null;
  } & { finish_reason?: string | null; logprobs?: unknown };
  return {
    content: ch[key]?.content ?? '',
    finishReason: ch.finish_reason ?? null,
    logprobs: wantLogprobs ? readLogprobs(ch.logprobs, where) : [],
  };
}

/** choices[0].logprobs.content as {token, logprob} entries (absent or null: none). */
function readLogprobs(logprobs: unknown, where: string): TokenLogprob[] {
  const lp = checked(LOGPROBS.read(logprobs === undefined ? null : logprobs, 1), 'choices[0].logprobs', where);
  return (lp?.content ?? []).map((e) => ({ token: e.token, logprob: e.logprob }));
}

/** The usage object (absent or null: null); a count that is not a whole number ≥ 0 is a ModelCallError. */
export function readUsage(usage: unknown, where: string): ChatResult['usage'] | null {
  const u = checked(USAGE.read(usage === undefined ? null : usage, 1), 'usage', where);
  return u && { promptTokens: u.prompt_tokens ?? 0, completionTokens: u.completion_tokens ?? 0 };
}

/** finish_reason in our terms; reasons we do not know (and names like "__proto__") are 'stop'. */
export function finishReason(reason: string): FinishReason {
  return Object.hasOwn(FINISH, reason) ? FINISH[reason]! : 'stop';
}

const FINISH: Record<string, FinishReason> = {
  stop: 'stop',
  length: 'length',
  tool_calls: 'tool_calls',
  function_call: 'tool_calls',
  content_filter: 'stop',
};
