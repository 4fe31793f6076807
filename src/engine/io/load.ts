/**
 * Loading a checkpoint from its files (model_files.ts: ModelFiles, wherever they are):
 * `loadCheckpoint(files, { onProgress })`: config.json → ModelConfig, model.safetensors or the
 * index + shards → TensorStore (checked against the config), tokenizer.json +
 * tokenizer_config.json (+ chat_template.jinja) → TextTokenizer; `planWeights` reads config.json
 * alone for the memory each weight format needs; `loadPeftAdapter` a PEFT adapter. Progress is
 * reported in bytes, per file and overall (the overall total is null until every size is known).
 */
import { abortError, ModelLoadError } from '../../core/errors.ts';
import { checkCheckpointTensors, modelConfigFromHf, type ModelConfig } from './config.ts';
import {
  CHAT_TEMPLATE_FILE,
  CONFIG_FILE,
  isNotFound,
  TOKENIZER_CONFIG_FILE,
  TOKENIZER_FILE,
  type ModelFiles,
} from './model_files.ts';
import { ADAPTER_CONFIG_FILE, ADAPTER_WEIGHTS_FILE, importPeft, type LoraAdapter } from './peft.ts';
import {
  INDEX_FILE,
  SINGLE_FILE,
  TensorStore,
  parseSafetensors,
  parseSafetensorsIndex,
  shardFiles,
  type SafetensorsFile,
} from './safetensors.ts';
import { TextTokenizer } from './tokenizer.ts';
import { weightBytes, WEIGHT_FORMATS, type WeightFormat } from './pack.ts';

export interface LoadProgress {
  /** The file being read. */
  file: string;
  fileLoaded: number;
  fileTotal: number | null;
  /** Bytes read across all files of this load. */
  loaded: number;
  /** Sum of the sizes of every file this load reads; null until the weight files are known and while any size is unknown. */
  total: number | null;
  /** Files finished so far, and the number to read (grows once the index names the shards). */
  filesDone: number;
  filesTotal: number;
}

export type LoadProgressFn = (p: LoadProgress) => void;

/** Reads files one after another, reporting overall progress. */
class ProgressReader {
  private done = 0;
  private filesDone = 0;
  private sealed = false;
  private readonly planned = new Map<string, number | null>();

  constructor(
    private readonly files: ModelFiles,
    private readonly sizes: Map<string, number | null>,
    private readonly onProgress?: LoadProgressFn,
    private readonly signal?: AbortSignal,
  ) {}

  /** Bytes read so far. */
  get bytesRead(): number {
    return this.done;
  }

  /** Drop a planned file that turned out not to be needed. */
  unplan(name: string): void {
    this.planned.delete(name);
  }

  /** Announce files that will be read (so the overall total covers them). */
  plan(names: string[]): void {
    for (const n of names) if (!this.planned.has(n)) this.planned.set(n, this.sizes.get(n) ?? null);
  }

  /** Every file this load reads is planned now: the overall total can be reported. */
  seal(): void {
    this.sealed = true;
  }

  private total(): number | null {
    if (!this.sealed) return null;
    let t = 0;
    for (const s of this.planned.values()) {
      if (s === null) return null;
      t += s;
    }
    return t;
  }

  async read(name: string): Promise<Uint8Array> {
    this.plan([name]);
    if (this.signal?.aborted) throw abortError(this.signal);
    const bytes = await this.files.read(
      name,
      (loaded, fileTotal) => {
        if (fileTotal !== null && this.planned.get(name) === null) this.planned.set(name, fileTotal);
        this.onProgress?.({
          file: name,
          fileLoaded: loaded,
          fileTotal,
          loaded: this.done + loaded,
          total: this.total(),
          filesDone: this.filesDone,
          filesTotal: this.planned.size,
        });
      },
      this.signal,
    );
    this.planned.set(name, bytes.length);
    this.done += bytes.length;
    this.filesDone++;
    this.onProgress?.({
      file: name,
      fileLoaded: bytes.length,
      fileTotal: bytes.length,
      loaded: this.done,
      total: this.total(),
      filesDone: this.filesDone,
      filesTotal: this.planned.size,
    });
    return bytes;
  }

  /** Read if present; undefined when the source has no such file. */
  async maybe(name: string, known: boolean | null): Promise<Uint8Array | undefined> {
    if (known === false) return undefined;
    try {
      return await this.read(name);
    } catch (err) {
      if (isNotFound(err)) {
        this.planned.delete(name);
        return undefined;
      }
      throw err;
    }
  }
}

export interface LoadOptions {
  onProgress?: LoadProgressFn;
  signal?: AbortSignal;
  /** Load tokenizer.json and tokenizer_config.json (default true; missing files give tokenizer null). */
  tokenizer?: boolean;
  /**
   * How the model built from this checkpoint stores its frozen base on the GPU (io/pack.ts;
   * LlamaModel's `weights` option). Not used by loadCheckpoint itself, which returns the tensors
   * as stored; carried here so callers pass one options object through.
   */
  weights?: WeightFormat;
}

/** What a checkpoint will take before its weights are read: its config and the GPU bytes per format. */
export interface WeightPlan {
  config: ModelConfig;
  /** weightBytes(config, format) for every format. */
  bytes: Record<WeightFormat, number>;
}

/** Read config.json only (a few KB) and compute the GPU memory each weight format needs. */
export async function planWeights(files: ModelFiles, signal?: AbortSignal): Promise<WeightPlan> {
  const config = modelConfigFromHf(
    decodeJson(await files.read(CONFIG_FILE, undefined, signal), CONFIG_FILE) as Record<string, unknown>,
  );
  const bytes = {} as Record<WeightFormat, number>;
  for (const f of WEIGHT_FORMATS) {
    try {
      bytes[f] = weightBytes(config, f);
    } catch {
      bytes[f] = NaN; // a shape that format cannot pack (io/pack.ts checkPackable)
    }
  }
  return { config, bytes };
}

export interface Checkpoint {
  config: ModelConfig;
  /** config.json as parsed. */
  hfConfig: Record<string, unknown>;
  weights: TensorStore;
  tokenizer: TextTokenizer | null;
  /** The files read, in order. */
  files: string[];
  /** Total bytes read. */
  bytes: number;
}

const decodeJson = (bytes: Uint8Array, name: string): unknown => {
  try {
    return JSON.parse(new TextDecoder().decode(bytes));
  } catch (err) {
    throw new ModelLoadError(`${name} is not valid JSON: ${(err as Error).message}`, { code: 'bad-json', file: name });
  }
};

async function listSizes(files: ModelFiles): Promise<{ sizes: Map<string, number | null>; listed: boolean }> {
  try {
    const list = await files.list();
    return { sizes: new Map(list.map((f) => [f.name, f.size])), listed: true };
  } catch (err) {
    if ((err as Error).name === 'AbortError') throw err;
    return { sizes: new Map(), listed: false };
  }
}

/** Load a whole checkpoint: config, weights (single or sharded, checked), tokenizer. */
export async function loadCheckpoint(files: ModelFiles, opts: LoadOptions = {}): Promise<Checkpoint> {
  const { sizes, listed } = await listSizes(files);
  const known = (n: string): boolean | null => (listed ? sizes.has(n) : null);
  const reader = new ProgressReader(files, sizes, opts.onProgress, opts.signal);
  const wantTok = opts.tokenizer ?? true;
  const order: string[] = [];

  const sharded = known(INDEX_FILE) ?? null;
  const plan = [CONFIG_FILE];
  if (sharded !== true && known(SINGLE_FILE) !== false) plan.push(SINGLE_FILE);
  if (sharded === true) plan.push(INDEX_FILE);
  if (wantTok)
    for (const n of [TOKENIZER_FILE, TOKENIZER_CONFIG_FILE, CHAT_TEMPLATE_FILE])
      if (known(n) === true || (known(n) === null && n !== CHAT_TEMPLATE_FILE)) plan.push(n);
  reader.plan(plan);
  if (sharded === false) reader.seal(); // a listed single-file checkpoint: every size is known now

  const configBytes = await reader.read(CONFIG_FILE);
  order.push(CONFIG_FILE);
  const hfConfig = decodeJson(configBytes, CONFIG_FILE) as Record<string, unknown>;
  const config = modelConfigFromHf(hfConfig);

  let weights: TensorStore;
  const indexBytes = sharded === false ? undefined : await reader.maybe(INDEX_FILE, sharded);
  if (indexBytes) {
    reader.unplan(SINGLE_FILE);
    order.push(INDEX_FILE);
    const index = parseSafetensorsIndex(decodeJson(indexBytes, INDEX_FILE));
    const shards = shardFiles(index);
    reader.plan(shards);
    reader.seal();
    const parsed = new Map<string, SafetensorsFile>();
    for (const s of shards) {
      parsed.set(s, parseSafetensors(await reader.read(s)));
      order.push(s);
    }
    weights = TensorStore.fromFiles(parsed, index);
  } else {
    reader.seal();
    const bytes = await reader.maybe(SINGLE_FILE, known(SINGLE_FILE));
    if (!bytes)
      throw new ModelLoadError(
        `No weights in ${files.label}: neither ${SINGLE_FILE} nor ${INDEX_FILE} is there (only safetensors checkpoints are supported)`,
        { code: 'not-found', file: SINGLE_FILE },
      );
    order.push(SINGLE_FILE);
    weights = TensorStore.single(parseSafetensors(bytes));
  }
  checkCheckpointTensors(config, new Map(weights.names().map((n) => [n, weights.info(n)!.shape])));

  let tokenizer: TextTokenizer | null = null;
  if (wantTok) {
    const tj = await reader.maybe(TOKENIZER_FILE, known(TOKENIZER_FILE));
    if (tj) {
      order.push(TOKENIZER_FILE);
      const tc = await reader.maybe(TOKENIZER_CONFIG_FILE, known(TOKENIZER_CONFIG_FILE));
      if (tc) order.push(TOKENIZER_CONFIG_FILE);
      const tmpl = await reader.maybe(CHAT_TEMPLATE_FILE, known(CHAT_TEMPLATE_FILE));
      if (tmpl) order.push(CHAT_TEMPLATE_FILE);
      tokenizer = TextTokenizer.fromJson(
        decodeJson(tj, TOKENIZER_FILE),
        tc ? decodeJson(tc, TOKENIZER_CONFIG_FILE) : {},
        tmpl ? new TextDecoder().decode(tmpl) : null,
      );
    }
  }
  return { config, hfConfig, weights, tokenizer, files: order, bytes: reader.bytesRead };
}

/** Load a PEFT LoRA adapter (adapter_config.json + adapter_model.safetensors). */
export async function loadPeftAdapter(
  files: ModelFiles,
  opts: { model?: ModelConfig; onProgress?: LoadProgressFn; signal?: AbortSignal } = {},
): Promise<LoraAdapter> {
  const { sizes } = await listSizes(files);
  const reader = new ProgressReader(files, sizes, opts.onProgress, opts.signal);
  reader.plan([ADAPTER_CONFIG_FILE, ADAPTER_WEIGHTS_FILE]);
  reader.seal();
  const cfg = decodeJson(await reader.read(ADAPTER_CONFIG_FILE), ADAPTER_CONFIG_FILE);
  return importPeft(cfg, await reader.read(ADAPTER_WEIGHTS_FILE), opts.model);
}
