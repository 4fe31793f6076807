/**
 * Which model serves each role (designer, hint writer, agent), as a rune class.
 * Sources: WebLLM on this GPU, an OpenAI-compatible server, or a recorded
 * transcript (replay; to watch a recorded run without a GPU). Settings persist in
 * the store; an API key stays in this browser only.
 */
import { ROLES, type ChatModel, type ModelRole } from '../core/llm/chat_model.ts';
import { OpenAIChatModel } from '../core/llm/openai_model.ts';
import { ReplayChatModel } from '../core/llm/replay.ts';
import {
  assessCatalog,
  validateCustomModel,
  WEBLLM_CATALOG,
  type CustomModelRecord,
  type DownloadProgress,
  type Feasibility,
} from '../core/llm/webllm_catalog.ts';
import { serializeError } from '../core/errors.ts';
import type { Store } from '../core/store.ts';
import type { GpuReport } from '../engine/device.ts';

export type Source = 'webllm' | 'openai' | 'replay' | 'local';
export const SOURCES: Source[] = ['webllm', 'openai', 'local', 'replay'];

interface Saved {
  roles: Record<ModelRole, Source>;
  openai: { baseURL: string; model: string; apiKey: string };
  webllmId: string;
  customModels: CustomModelRecord[];
  vramBudgetMB: number;
}

export class ModelsState {
  roles = $state<Record<ModelRole, Source>>({ designer: 'webllm', hint: 'webllm', agent: 'webllm' });
  openai = $state({ baseURL: 'http://127.0.0.1:8000/v1', model: '', apiKey: '' });
  webllmId = $state<string>(WEBLLM_CATALOG[0]!.id);
  customModels = $state<CustomModelRecord[]>([]);
  vramBudgetMB = $state(4096);
  webllmStatus = $state<'idle' | 'loading' | 'ready' | 'error'>('idle');
  webllmProgress = $state<DownloadProgress | null>(null);
  webllmError = $state<string | null>(null);
  replayName = $state<string | null>(null);
  replayError = $state<string | null>(null);
  cached = $state<string[]>([]);
  storage = $state<{ usageBytes: number; quotaBytes: number } | null>(null);

  private webllm: ChatModel | null = null;
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
    if (s.webllmId) this.webllmId = s.webllmId;
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
      customModels: this.customModels,
      vramBudgetMB: this.vramBudgetMB,
    });
    await this.store.put('settings', 'models', saved);
  }

  /** Download (or read from cache) and load the chosen WebLLM model, with progress; cancellable. */
  async loadWebllm(): Promise<void> {
    this.cancelLoad();
    this.loadAbort = new AbortController();
    this.webllmStatus = 'loading';
    this.webllmError = null;
    this.webllmProgress = null;
    try {
      const { WebLlmChatModel } = await import('../platform/browser/webllm_model.ts');
      this.webllm = await WebLlmChatModel.load(this.webllmId, (p) => (this.webllmProgress = p), this.loadAbort.signal, {
        customModels: $state.snapshot(this.customModels),
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

  /** The model for a role, or an error that says what to set up. */
  modelFor(role: ModelRole): ChatModel {
    const source = this.roles[role];
    if (source === 'openai') {
      return new OpenAIChatModel({
        baseURL: this.openai.baseURL,
        model: this.openai.model,
        apiKey: this.openai.apiKey || undefined,
      });
    }
    if (source === 'local') {
      if (!this.local)
        throw new Error(`The ${role} uses our engine, but no checkpoint is loaded: load one in the Training panel.`);
      return this.local;
    }
    if (source === 'replay') {
      if (!this.replayText)
        throw new Error(`The ${role} uses a recorded transcript, but none is loaded: open one in the Models panel.`);
      return new ReplayChatModel(this.replayText);
    }
    if (!this.webllm) throw new Error(`The ${role} uses WebLLM, but no model is loaded: load one in the Models panel.`);
    return this.webllm;
  }

  /** Models for the three roles; a replay transcript is shared so each request finds its reply once. */
  modelsForRun(): Record<ModelRole, ChatModel> {
    const shared = new Map<Source, ChatModel>();
    const out = {} as Record<ModelRole, ChatModel>;
    for (const role of ROLES) {
      const src = this.roles[role];
      if (!shared.has(src)) shared.set(src, this.modelFor(role));
      out[role] = shared.get(src)!;
    }
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
