/**
 * Which model serves each role (designer, hint writer, agent), as a rune class.
 * Sources: WebLLM on this GPU, an OpenAI-compatible server (a hosted API with the user's key, or a
 * CPU server such as Ollama), or a recorded transcript (replay; to watch a recorded run without a
 * GPU). Settings persist in the store, except the API key: it lives in this tab's memory only, and
 * is saved (in this browser, never in a run or a link) only when the user ticks "remember".
 *
 * The WebLLM choice follows the adapter's default (core/llm/default_models.ts: the table the Run panel
 * and the Models panel both read through webllmId, so they name the same model) until the user picks
 * one; loadBlock() says why Load is off.
 * The server form's context window is used when the server does not report one (/v1/models).
 */
import { keyNeed, withoutUrlCredentials } from '../core/llm/base_url.ts';
import { modelLimits, ROLES, type ChatModel, type ModelLimits, type ModelRole } from '../core/llm/chat_model.ts';
import { OpenAIChatModel } from '../core/llm/openai_model.ts';
import type { Thinking } from '../core/llm/thinking.ts';
import { ReplayChatModel } from '../core/llm/replay.ts';
import { findCatalogEntry } from '../core/llm/webllm/catalog.ts';
import { validateCustomModel, type CustomModelRecord } from '../core/llm/webllm/custom_records.ts';
import { assessCatalog, assessFeasibility, type Feasibility } from '../core/llm/webllm/feasibility.ts';
import { defaultWebLlmModel } from '../core/llm/default_models.ts';
import type { DownloadProgress } from '../core/llm/webllm/progress.ts';
import { serializeError } from '../core/errors.ts';
import type { Store } from '../core/store.ts';
import type { GpuReport } from '../engine/engine_api.ts';
import { gpu } from './gpu.svelte.ts';

export type Source = 'webllm' | 'openai' | 'replay' | 'local';

/** A route to a real run without a GPU: a hosted API (a key) or a CPU server on this computer. */
export interface ServerPreset {
  name: string;
  kind: 'hosted' | 'cpu';
  baseURL: string;
  /** An example model name on that server (the user may enter any the server lists). */
  model: string;
  /** The window to declare, for servers that do not report one. */
  contextWindow?: number;
  /** What to do first (get a key, or the commands to run), for this page's origin. */
  note: (origin: string) => string;
}

/**
 * Figures marked "estimate" are not measured here (this machine has no model weights); a run's own
 * speed shows in Models → Try a prompt (tokens/s) and in the Run view's progress line.
 */
const CPU_SPEED =
  'On a laptop CPU a 1.5B model at 4 bits generates roughly 10–30 tokens/s (an estimate) and a laptop-preset cycle generates roughly 30,000–100,000 tokens (an estimate from its limits), so expect 20 minutes to 2 hours per cycle; a first look with 2 environments and 2 plays each (Settings: skills per cycle 1, plays per environment 2) takes about a sixth of that. The 0.5B model is 2–3× faster and writes weaker environments.';

export const SERVER_PRESETS: ServerPreset[] = [
  {
    name: 'OpenAI',
    kind: 'hosted',
    baseURL: 'https://api.openai.com/v1',
    model: 'gpt-4o-mini',
    note: () => 'Create a key under API keys in your OpenAI account, paste it below and press Test connection.',
  },
  {
    name: 'OpenRouter',
    kind: 'hosted',
    baseURL: 'https://openrouter.ai/api/v1',
    model: 'qwen/qwen-2.5-7b-instruct',
    note: () => "One key for many providers' models; its site lists each model's name and price per token.",
  },
  {
    name: 'Groq',
    kind: 'hosted',
    baseURL: 'https://api.groq.com/openai/v1',
    model: 'llama-3.1-8b-instant',
    note: () => 'Create a key in the Groq console; its model list names the models this key can use.',
  },
  {
    name: 'Together',
    kind: 'hosted',
    baseURL: 'https://api.together.xyz/v1',
    model: 'Qwen/Qwen2.5-7B-Instruct-Turbo',
    note: () => "Create a key in your Together account; its model list gives each model's exact name.",
  },
  {
    name: 'Ollama',
    kind: 'cpu',
    baseURL: 'http://127.0.0.1:11434/v1',
    model: 'qwen2.5:1.5b',
    contextWindow: 8192,
    note: (origin) =>
      `Install Ollama, run "ollama pull qwen2.5:1.5b", then start it allowing this page and an 8k context: OLLAMA_ORIGINS=${origin} OLLAMA_CONTEXT_LENGTH=8192 ollama serve. ${CPU_SPEED}`,
  },
  {
    name: 'llama.cpp',
    kind: 'cpu',
    baseURL: 'http://127.0.0.1:8080/v1',
    model: 'qwen2.5-1.5b-instruct',
    contextWindow: 8192,
    note: () =>
      `Start its server (it answers any page): llama-server -hf Qwen/Qwen2.5-1.5B-Instruct-GGUF:Q4_K_M -c 8192 --port 8080 (it downloads the model once). ${CPU_SPEED}`,
  },
];
export const SOURCES: Source[] = ['webllm', 'openai', 'local', 'replay'];

interface Saved {
  roles: Record<ModelRole, Source>;
  /** apiKey is '' unless rememberKey. */
  openai: { baseURL: string; model: string; apiKey: string; contextWindow?: number | null };
  rememberKey?: boolean;
  webllmId: string;
  /** The user picked webllmId (else it follows the adapter's default). */
  webllmChosen?: boolean;
  customModels: CustomModelRecord[];
  vramBudgetMB: number;
}

export class ModelsState {
  roles = $state<Record<ModelRole, Source>>({ designer: 'webllm', hint: 'webllm', agent: 'webllm' });
  /** contextWindow: null = ask the server (GET /models), else the default 4096 (openai_model.ts). */
  openai = $state<{ baseURL: string; model: string; apiKey: string; contextWindow: number | null }>({
    baseURL: 'http://127.0.0.1:8000/v1',
    model: '',
    apiKey: '',
    contextWindow: null,
  });
  /** The model the user picked (webllmChosen), else unused. */
  private chosenId = $state<string>('');
  webllmChosen = $state(false);
  /** Save the API key in this browser (else it is forgotten when the tab closes). */
  rememberKey = $state(false);
  customModels = $state<CustomModelRecord[]>([]);
  vramBudgetMB = $state(4096);
  webllmStatus = $state<'idle' | 'loading' | 'ready' | 'error'>('idle');
  webllmProgress = $state<DownloadProgress | null>(null);
  webllmError = $state<string | null>(null);
  replayName = $state<string | null>(null);
  replayError = $state<string | null>(null);
  cached = $state<string[]>([]);
  storage = $state<{ usageBytes: number; quotaBytes: number } | null>(null);

  private webllm: ChatModel | (ChatModel & { limits: ModelLimits }) | null = null;
  /** Our engine's model (set by the app from TrainingState). */
  local: ChatModel | null = null;
  private replayText: string | null = null;
  private loadAbort: AbortController | null = null;

  /** `adapter`: the WebGPU report once known (the app's GPU check), which the default follows. */
  constructor(
    private readonly store: Store,
    private readonly adapter: () => GpuReport | null = () => gpu.report,
  ) {}

  /** The WebLLM model every role uses: the user's pick, else this adapter's default within the budget. */
  get webllmId(): string {
    return this.webllmChosen ? this.chosenId : defaultWebLlmModel(this.adapter(), { vramBudgetMB: this.vramBudgetMB });
  }

  feasibility(report: GpuReport | null): Map<string, Feasibility> {
    if (!report) return new Map();
    const list = assessCatalog(report, { vramBudgetMB: this.vramBudgetMB });
    return new Map(list.map((x) => [x.entry.id, x.feasibility]));
  }

  async load(): Promise<void> {
    const s = (await this.store.get<Partial<Saved>>('settings', 'models').catch(() => undefined)) ?? {};
    if (s.roles) this.roles = { ...this.roles, ...s.roles };
    this.rememberKey = s.rememberKey === true;
    if (s.openai)
      this.openai = { ...this.openai, ...s.openai, apiKey: this.rememberKey ? (s.openai.apiKey ?? '') : '' };
    if (s.webllmId && (s.webllmChosen ?? true)) this.choose(s.webllmId);
    if (Array.isArray(s.customModels)) this.customModels = s.customModels.filter((m) => validateCustomModel(m).ok);
    if (typeof s.vramBudgetMB === 'number') this.vramBudgetMB = s.vramBudgetMB;
    const replay = await this.store.get<{ name: string; text: string }>('settings', 'replay').catch(() => undefined);
    if (replay) {
      this.replayText = replay.text;
      this.replayName = replay.name;
    }
  }

  async save(): Promise<void> {
    const saved: Saved = $state.snapshot({
      roles: this.roles,
      // a user name or password typed into the URL is never saved (the backend refuses such a URL)
      openai: {
        ...this.openai,
        baseURL: withoutUrlCredentials(this.openai.baseURL),
        apiKey: this.rememberKey ? this.openai.apiKey : '',
      },
      rememberKey: this.rememberKey,
      webllmId: this.webllmId,
      webllmChosen: this.webllmChosen,
      customModels: this.customModels,
      vramBudgetMB: this.vramBudgetMB,
    });
    await this.store.put('settings', 'models', saved);
  }

  /**
   * Set by "Enter the key" (the Run panel's key guard): the Models panel opens its server form and
   * puts the cursor in the key field, then clears it.
   */
  focusKey = $state(false);

  /**
   * Why Start should stop, or warn, before the first call: roles on the server whose key this tab
   * does not hold (a key lives in the tab's memory unless "Remember" is ticked, so a reload forgets
   * it while the roles still read openai:…). `blocks`: a known hosted API, which answers nothing
   * without one; otherwise a host off this computer and network, which may need one. Null when no role
   * uses the server, the key is there, or the server is on this computer or network.
   */
  keyGuard(): { roles: ModelRole[]; host: string; blocks: boolean; message: string } | null {
    const roles = ROLES.filter((r) => this.roles[r] === 'openai');
    if (!roles.length || this.openai.apiKey) return null;
    const need = keyNeed(this.openai.baseURL);
    if (need === 'none') return null;
    let host = this.openai.baseURL;
    try {
      host = new URL(this.openai.baseURL).host;
    } catch {
      // the URL's own problem is said when the run starts
    }
    const who = roles.length === ROLES.length ? 'Every role' : `The ${roles.join(' and ')}`;
    const kept =
      'this tab holds none: a key is kept only in the tab’s memory, and forgotten on a reload, unless “Remember the key” is ticked.';
    return {
      roles,
      host,
      blocks: need === 'required',
      message:
        need === 'required'
          ? `${who} uses ${host}, which answers nothing without an API key, and ${kept}`
          : `${who} uses ${host}, which may need an API key, and ${kept} Start anyway if that server needs none.`,
    };
  }

  /** The user picked a WebLLM model: keep it over the adapter's default. */
  choose(id: string): void {
    this.chosenId = id;
    this.webllmChosen = true;
  }

  /** Why the chosen WebLLM model cannot be loaded here, or null when it can (or cannot be judged). */
  loadBlock(report: GpuReport | null): string | null {
    if (!report) return 'WebGPU is not available here, so WebLLM models cannot run. Use a server or a transcript.';
    const entry = findCatalogEntry(this.webllmId);
    if (!entry) return null; // a custom record: web-llm says what is wrong
    const f = assessFeasibility(entry, report, { vramBudgetMB: this.vramBudgetMB });
    return f.ok ? null : f.reasons.join(' ');
  }

  /** Download (or read from cache) and load the chosen WebLLM model, with progress; cancellable. */
  async loadWebllm(adapter?: GpuReport | null): Promise<void> {
    this.cancelLoad();
    this.loadAbort = new AbortController();
    this.webllmStatus = 'loading';
    this.webllmError = null;
    this.webllmProgress = null;
    try {
      const { WebLlmChatModel } = await import('../platform/browser/webllm_model.ts');
      this.webllm = await WebLlmChatModel.load(this.webllmId, (p) => (this.webllmProgress = p), this.loadAbort.signal, {
        customModels: $state.snapshot(this.customModels),
        ...(adapter ? { adapter } : {}),
      });
      this.webllmStatus = 'ready';
      void this.refreshCache();
    } catch (err) {
      this.webllm = null;
      this.webllmStatus = (err as Error).name === 'AbortError' ? 'idle' : 'error';
      this.webllmError = (err as Error).name === 'AbortError' ? null : serializeError(err).message;
    } finally {
      this.loadAbort = null;
    }
  }

  cancelLoad(): void {
    this.loadAbort?.abort();
  }

  async refreshCache(): Promise<void> {
    try {
      const { listCachedModels, storageEstimate } = await import('../platform/browser/webllm_model.ts');
      this.cached = await listCachedModels(undefined, $state.snapshot(this.customModels));
      this.storage = await storageEstimate();
    } catch (err) {
      this.webllmError = serializeError(err).message;
    }
  }

  async deleteCached(id: string): Promise<void> {
    const { deleteCachedModel } = await import('../platform/browser/webllm_model.ts');
    await deleteCachedModel(id, $state.snapshot(this.customModels));
    await this.refreshCache();
  }

  addCustom(input: unknown): string[] {
    const r = validateCustomModel(input);
    if (!r.ok) return r.errors;
    this.customModels = [...this.customModels.filter((m) => m.model_id !== r.value.model_id), r.value];
    return [];
  }

  setReplay(name: string, text: string): void {
    try {
      new ReplayChatModel(text); // validates the format
      this.replayText = text;
      this.replayName = name;
      this.replayError = null;
      void this.store.put('settings', 'replay', { name, text }).catch(() => undefined);
    } catch (err) {
      this.replayText = null;
      this.replayName = null;
      this.replayError = serializeError(err).message;
    }
  }

  /**
   * The model for a role, or an error that says what to set up; `limits` bound each call and
   * `thinking` is config.thinking (both from the run's config).
   */
  modelFor(role: ModelRole, limits: ModelLimits = modelLimits(), thinking: Thinking = 'off'): ChatModel {
    const source = this.roles[role];
    if (source === 'openai') {
      const window = this.openai.contextWindow;
      return new OpenAIChatModel({
        baseURL: this.openai.baseURL,
        model: this.openai.model,
        apiKey: this.openai.apiKey || undefined,
        ...(typeof window === 'number' && window > 0 ? { contextWindow: window } : {}),
        thinking,
        ...limits,
      });
    }
    if (source === 'local') {
      if (!this.local)
        throw new Error(
          `The ${role} uses our engine, but no checkpoint is loaded: load one (or start a tiny fresh model) in the Training panel.`,
        );
      if ('thinking' in this.local) this.local.thinking = thinking;
      return this.local;
    }
    if (source === 'replay') {
      if (!this.replayText)
        throw new Error(`The ${role} uses a recorded transcript, but none is loaded: open one in the Models panel.`);
      return new ReplayChatModel(this.replayText);
    }
    if (!this.webllm) throw new Error(`The ${role} uses WebLLM, but no model is loaded: load one in the Models panel.`);
    if ('limits' in this.webllm) this.webllm.limits = limits;
    if ('thinking' in this.webllm) this.webllm.thinking = thinking;
    return this.webllm;
  }

  /** Models for the three roles; a replay transcript is shared so each request finds its reply once. */
  modelsForRun(limits: ModelLimits = modelLimits(), thinking: Thinking = 'off'): Record<ModelRole, ChatModel> {
    const shared = new Map<Source, ChatModel>();
    const out = {} as Record<ModelRole, ChatModel>;
    for (const role of ROLES) {
      const src = this.roles[role];
      if (!shared.has(src)) shared.set(src, this.modelFor(role, limits, thinking));
      out[role] = shared.get(src)!;
    }
    return out;
  }

  /** modelsForRun, with each server asked for its context window first (so the first call is budgeted right). */
  async modelsReady(
    limits: ModelLimits = modelLimits(),
    thinking: Thinking = 'off',
  ): Promise<Record<ModelRole, ChatModel>> {
    const out = this.modelsForRun(limits, thinking);
    await Promise.all(Object.values(out).map((m) => (m instanceof OpenAIChatModel ? m.probe() : undefined)));
    return out;
  }

  describe(role: ModelRole): string {
    const src = this.roles[role];
    if (src === 'openai') return `openai:${this.openai.model || '?'}`;
    if (src === 'replay') return `replay:${this.replayName ?? '?'}`;
    if (src === 'local') return `local:${this.local?.model ?? '?'}`;
    return `webllm:${this.webllmId}`;
  }
}
