/**
 * On-device LoRA training, as a rune class: our engine in a worker (workers/engine.worker.ts),
 * a checkpoint loaded from the Hugging Face Hub or from local files with byte-level progress, a
 * LoRA adapter (new, or imported in PEFT format), policy-gradient steps on the run's samples,
 * and PEFT export. `chatModel` is the `local` backend the Models panel offers for any role.
 */
import * as Comlink from 'comlink';
import '../../workers/rpc.ts';
import { ModelLoadError, serializeError } from '../core/errors.ts';
import type { ChatMessage, ChatModel, ChatOptions, ChatResult, ModelCapabilities } from '../core/llm/chat_model.ts';
import { agentSamples, designerSamples, normaliseRole, type ChatSample } from '../core/train/grpo.ts';
import type { ArchiveRecord, RolloutRecord } from '../core/spade/run_store.ts';
import type { EngineApi, ModelSource, ModelSummary } from '../engine/engine_api.ts';
import type { LoadProgress } from '../engine/io/load.ts';
import type { LoraModule } from '../engine/io/peft.ts';

export const LORA_TARGETS: LoraModule[] = ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'];

export interface StepRecord {
  step: number;
  loss: number;
  gradNorm: number;
  tokens: number;
  samples: number;
  ms: number;
}

type Remote = Comlink.Remote<EngineApi>;

/** ChatModel over the engine worker. */
class EngineChatModel implements ChatModel {
  readonly backend = 'local';
  constructor(
    private readonly api: Remote,
    readonly model: string,
    readonly capabilities: ModelCapabilities,
  ) {}
  async chat(messages: ChatMessage[], o: ChatOptions = {}): Promise<ChatResult> {
    const { signal, onToken, ...rest } = o;
    const stop = () => void this.api.abort();
    signal?.addEventListener('abort', stop, { once: true });
    try {
      return await this.api.chat(messages, rest, onToken ? Comlink.proxy(onToken) : undefined);
    } finally {
      signal?.removeEventListener('abort', stop);
    }
  }
}

export class TrainingState {
  status = $state<'empty' | 'loading' | 'ready' | 'training' | 'error'>('empty');
  progress = $state<LoadProgress | null>(null);
  summary = $state<ModelSummary | null>(null);
  error = $state<string | null>(null);
  repo = $state('HuggingFaceTB/SmolLM2-135M-Instruct');
  lora = $state({ r: 8, alpha: 16, targets: ['q_proj', 'v_proj'] as LoraModule[], lr: 1e-4, seed: 0 });
  autoTrain = $state(false);
  history = $state<StepRecord[]>([]);
  chatModel = $state<ChatModel | null>(null);

  private api: Remote | null = null;
  private worker: Worker | null = null;

  private remote(): Remote {
    if (!this.api) {
      this.worker = new Worker(new URL('../../workers/engine.worker.ts', import.meta.url), {
        type: 'module',
        name: 'spade-engine',
      });
      this.api = Comlink.wrap<EngineApi>(this.worker);
    }
    return this.api;
  }

  async load(source: ModelSource): Promise<void> {
    this.status = 'loading';
    this.error = null;
    this.progress = null;
    this.history = [];
    try {
      const s = await this.remote().load(
        source,
        Comlink.proxy((p: LoadProgress) => (this.progress = p)),
      );
      this.summary = s;
      this.chatModel = new EngineChatModel(this.remote(), s.name, {
        streaming: true,
        logprobs: true,
        trainable: true,
        contextWindow: s.contextWindow,
      });
      this.status = 'ready';
    } catch (err) {
      this.status = 'error';
      const e = serializeError(err);
      this.error =
        e.name === 'WebGpuUnavailableError'
          ? e.message
          : `${e.message}${err instanceof ModelLoadError ? '' : ' — check the repository name or the files you picked (config.json, tokenizer.json and *.safetensors).'}`;
    }
  }

  /** Stop the worker (and free its GPU memory). */
  unload(): void {
    this.worker?.terminate();
    this.worker = null;
    this.api = null;
    this.summary = null;
    this.chatModel = null;
    this.status = 'empty';
  }

  async newAdapter(): Promise<void> {
    await this.guard(async () => {
      this.summary = await this.remote().initLora(
        this.lora.r,
        this.lora.alpha,
        $state.snapshot(this.lora.targets),
        this.lora.seed,
      );
      this.history = [];
    });
  }

  async importAdapter(configFile: File, weightsFile: File): Promise<void> {
    await this.guard(async () => {
      const weights = new Uint8Array(await weightsFile.arrayBuffer());
      this.summary = await this.remote().importAdapter(
        await configFile.text(),
        Comlink.transfer(weights, [weights.buffer]),
      );
    });
  }

  async exportAdapter(): Promise<{ configJson: string; weights: Uint8Array } | null> {
    let out: { configJson: string; weights: Uint8Array } | null = null;
    await this.guard(async () => {
      out = await this.remote().exportAdapter();
    });
    return out;
  }

  /** One policy-gradient step on `samples`. */
  async train(samples: ChatSample[]): Promise<StepRecord | null> {
    if (!samples.length) {
      this.error = 'No training signal in these samples: every play of each environment scored the same.';
      return null;
    }
    let rec: StepRecord | null = null;
    const prev = this.status;
    this.status = 'training';
    try {
      const r = await this.remote().trainStep(samples, { lr: this.lora.lr });
      rec = {
        step: this.history.length + 1,
        loss: r.loss,
        gradNorm: r.gradNorm,
        tokens: r.tokens,
        samples: r.samples,
        ms: r.ms,
      };
      this.history = [...this.history, rec];
      this.error = null;
    } catch (err) {
      this.error = serializeError(err).message;
    } finally {
      this.status = prev === 'training' ? 'ready' : prev;
    }
    return rec;
  }

  /** GRPO samples from one cycle: the agent's unhinted plays and the designer's first attempts, each normalised per role. */
  samplesFromCycle(d: {
    archive: ArchiveRecord[];
    rollouts: RolloutRecord[];
    briefs: Map<string, ChatMessage[]>;
  }): ChatSample[] {
    return [...normaliseRole(agentSamples(d.rollouts)), ...normaliseRole(designerSamples(d.archive, d.briefs))];
  }

  private async guard(fn: () => Promise<void>): Promise<void> {
    try {
      this.error = null;
      await fn();
    } catch (err) {
      this.error = serializeError(err).message;
    }
  }
}
