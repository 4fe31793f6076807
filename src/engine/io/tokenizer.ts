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
 */
import { Template } from '@huggingface/jinja';
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

/** Render a chat template (Jinja) with the variables transformers passes. */
export function renderChatTemplate(
  template: string,
  messages: readonly ChatMessage[],
  specials: { bos_token?: string | null; eos_token?: string | null } = {},
  opts: ChatTemplateOptions = {},
): string {
  let compiled: Template;
  try {
    compiled = new Template(template);
  } catch (err) {
    throw new ModelLoadError(`The chat template does not parse: ${(err as Error).message}`);
  }
  try {
    return compiled.render({
      messages: messages.map((m) => ({ ...m })),
      add_generation_prompt: opts.addGenerationPrompt ?? true,
      bos_token: specials.bos_token ?? '',
      eos_token: specials.eos_token ?? '',
      ...opts.extra,
    });
  } catch (err) {
    throw new ModelLoadError(`The chat template failed to render: ${(err as Error).message}`);
  }
}

export class TextTokenizer {
  readonly bosToken: string | null;
  readonly eosToken: string | null;
  readonly bosTokenId: number | null;
  readonly eosTokenId: number | null;
  /** The Jinja chat template, or null when the checkpoint has none. */
  readonly chatTemplate: string | null;

  private constructor(
    private readonly tok: Tokenizer,
    config: Json,
    chatTemplate: string | null,
  ) {
    this.bosToken = tokenText(config.bos_token);
    this.eosToken = tokenText(config.eos_token);
    this.bosTokenId = this.bosToken === null ? null : (tok.token_to_id(this.bosToken) ?? null);
    this.eosTokenId = this.eosToken === null ? null : (tok.token_to_id(this.eosToken) ?? null);
    this.chatTemplate = chatTemplate;
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
    let tok: Tokenizer;
    try {
      tok = new Tokenizer(tj, tc);
    } catch (err) {
      throw new ModelLoadError(`tokenizer.json could not be loaded: ${(err as Error).message}`);
    }
    return new TextTokenizer(tok, tc, chatTemplate ?? chatTemplateFromConfig(tc));
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
    return renderChatTemplate(
      this.chatTemplate,
      messages,
      { bos_token: this.bosToken, eos_token: this.eosToken },
      opts,
    );
  }

  /** Template → ids, without adding special tokens again (the template places BOS itself). */
  encodeChat(messages: readonly ChatMessage[], opts: ChatTemplateOptions = {}): number[] {
    return this.encode(this.applyChatTemplate(messages, opts), { addSpecialTokens: false });
  }
}
