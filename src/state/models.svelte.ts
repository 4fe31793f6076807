/**
 * Which model serves each role (designer, hint writer, agent), as a rune class.
 * Sources: WebLLM on this GPU, an OpenAI-compatible server, or a recorded
 * transcript (replay; to watch a recorded run without a GPU). Settings persist in
 * the store; an API key stays in this browser only.
 *
 * The WebLLM choice defaults to what this adapter can run (defaultWebLlmModel: the q4f32 twin without
 * shader-f16, within the VRAM budget) until the user picks one; loadBlock() says why Load is off.
 * The server form's context window is used when the server does not report one (/v1/models).
 */
import { modelLimits, ROLES, type ChatModel, type ModelLimits, type ModelRole } from '../core/llm/chat_model.ts';
import { OpenAIChatModel } from '../core/llm/openai_model.ts';
import type { Thinking } from '../core/llm/thinking.ts';
import { ReplayChatModel } from '../core/llm/replay.ts';
import { findCatalogEntry } from '../core/llm/webllm/catalog.ts';
import { validateCustomModel, type CustomModelRecord } from '../core/llm/webllm/custom_records.ts';
import {
  assessCatalog,
  assessFeasibility,
  defaultWebLlmModel,
  type Feasibility,
} from '../core/llm/webllm/feasibility.ts';
import type { DownloadProgress } from '../core/llm/webllm/progress.ts';
import { serializeError } from '../core/errors.ts';
import type { Store } from '../core/store.ts';
import type { GpuReport } from '../engine/engine_api.ts';

export type Source = 'webllm' | 'openai' | 'replay' | 'local';
export const SOURCES: Source[] = ['webllm', 'openai', 'local', 'replay'];

interface Saved {
  roles: Record<ModelRole, Source>;
  openai: { baseURL: string; model: string; apiKey: string; contextWindow?: number | null };
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
  webllmId = $state<string>(defaultWebLlmModel(null));
  webllmChosen = $state(false);
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

  constructor(private readonly store: Store) {}

  feasibility(report: GpuReport | null): Map<string, Feasibility> {
    if (!report) return new Map();
    const list = assessCatalog(report, { vramBudgetMB: this.vramBudgetMB });
    return new Map(list.map((x) => [x.entry.id, x.feasibility]));
  }

  async load(): Promise<void> {
    const s = (await this.store.get<Partial<Saved>>('settings', 'models').catch(() => undefined)) ?? {};
    if (s.roles) this.roles = { ...this.roles, ...s.roles };
    if (s.openai) this.openai = { ...this.openai, ...s.openai };
    if (s.webllmId && (s.webllmChosen ?? true)) {
      this.webllmId = s.webllmId;
      this.webllmChosen = true;
    }
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
      openai: this.openai,
      webllmId: this.webllmId,
      webllmChosen: this.webllmChosen,
      customModels: this.customModels,
      vramBudgetMB: this.vramBudgetMB,
    });
    await this.store.put('settings', 'models', saved);
  }

  /** Follow the adapter's default WebLLM model until the user picks one. */
  applyDefault(report: GpuReport | null): void {
    if (this.webllmChosen) return;
    const id = defaultWebLlmModel(report, { vramBudgetMB: this.vramBudgetMB });
    if (id !== this.webllmId) this.webllmId = id;
  }

  /** The user picked a WebLLM model: keep it over the adapter's default. */
  choose(id: string): void {
    this.webllmId = id;
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
