/**
 * The engine worker: our WebGPU engine (model, LoRA, training) off the page, through comlink.
 * Downloads are cached with the Cache API (src/platform/browser/model_cache.ts).
 */
import { createEngineApi } from '../src/engine/engine_api.ts';
import { ModelCache } from '../src/platform/browser/model_cache.ts';
import { exposeApi } from '../src/platform/rpc.ts';

exposeApi(createEngineApi({ cache: new ModelCache() }));
