// The Models panel's state (state/models.svelte.ts): the API key of a hosted API lives in the tab's
// memory and is saved only when "remember" is ticked, reaches the server as a Bearer header, and the
// WebLLM model every role names follows the adapter's default (core/llm/default_models.ts) until a
// pick — the one value the Run panel and the Models panel both show.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultWebLlmModel } from '../../src/core/llm/default_models.ts';
import { checkAppRecord } from '../../src/core/spade/app_records.ts';
import { CheckedStore, MemoryStore } from '../../src/core/store.ts';
import type { GpuReport } from '../../src/engine/engine_api.ts';
import { SERVER_PRESETS, ModelsState } from '../../src/state/models.svelte.ts';
import { startFakeOpenAI, type FakeServer } from '../helpers/fake_openai_server.ts';

const KEY = 'sk-test-remember-7c1e';

function report(isFallback: boolean, shaderF16 = false): GpuReport {
  return {
    vendor: 'fake',
    architecture: isFallback ? 'swiftshader' : 'test',
    description: '',
    isFallback,
    features: { shaderF16, subgroups: false, timestampQuery: false },
    limits: {
      maxStorageBufferBindingSize: 2 ** 30,
      maxBufferSize: 2 ** 30,
      maxComputeWorkgroupSizeX: 256,
      maxComputeInvocationsPerWorkgroup: 256,
      maxComputeWorkgroupStorageSize: 32768,
    },
  } as GpuReport;
}

let server: FakeServer;
beforeAll(async () => {
  server = await startFakeOpenAI({ reply: async () => 'hello' });
});
afterAll(() => server.close());

describe('the API key', () => {
  it('is saved only when "remember" is ticked, and reaches the server as a Bearer header', async () => {
    // read back through the app's record check, as the app does
    const notices: string[] = [];
    const store = new CheckedStore(new MemoryStore(), checkAppRecord, (n) => notices.push(n));
    const m = new ModelsState(store, () => null);
    m.openai = { baseURL: server.url, model: 'tiny', apiKey: KEY, contextWindow: null };
    for (const r of ['designer', 'hint', 'agent'] as const) m.roles[r] = 'openai';
    await m.save();
    expect(JSON.stringify(await store.get('settings', 'models'))).not.toContain(KEY);
    // the tab still has it: the server gets it
    server.authorizations.length = 0;
    await m.modelFor('agent').chat([{ role: 'user', content: 'hi' }]);
    expect(server.authorizations.at(-1)).toBe(`Bearer ${KEY}`);
    // a reload (a new tab) has no key
    const reloaded = new ModelsState(store, () => null);
    await reloaded.load();
    expect(reloaded.openai.apiKey).toBe('');
    expect(reloaded.openai.model).toBe('tiny');
    expect(reloaded.rememberKey).toBe(false);
    // ticked: saved, and back after a reload; unticked again: gone from the store
    m.rememberKey = true;
    await m.save();
    const kept = new ModelsState(store, () => null);
    await kept.load();
    expect(kept.openai.apiKey).toBe(KEY);
    expect(kept.rememberKey).toBe(true);
    m.rememberKey = false;
    await m.save();
    expect(JSON.stringify(await store.get('settings', 'models'))).not.toContain(KEY);
    expect(notices).toEqual([]);
  });

  it('every route preset names a base URL and a model; CPU servers say what to run', () => {
    expect(SERVER_PRESETS.filter((p) => p.kind === 'hosted').length).toBeGreaterThanOrEqual(2);
    for (const p of SERVER_PRESETS) {
      expect(p.baseURL, p.name).toMatch(/^https?:\/\/.+\/v1$/);
      expect(p.model.length, p.name).toBeGreaterThan(0);
      if (p.kind === 'hosted') expect(p.baseURL, p.name).toMatch(/^https:/);
      else expect(p.note('http://127.0.0.1:5173'), p.name).toMatch(/estimate/);
    }
    expect(SERVER_PRESETS.find((p) => p.name === 'Ollama')!.note('http://x:1')).toContain('OLLAMA_ORIGINS=http://x:1');
  });
});

describe('the default model of every role', () => {
  it('follows the adapter until a pick, and describe() names it for every role', () => {
    let adapter: GpuReport | null = null;
    const m = new ModelsState(new MemoryStore(), () => adapter);
    expect(m.describe('designer')).toBe(`webllm:${defaultWebLlmModel(null)}`);
    adapter = report(true);
    expect(m.webllmId).toBe('SmolLM2-360M-Instruct-q4f32_1-MLC');
    for (const r of ['designer', 'hint', 'agent'] as const) expect(m.describe(r)).toBe(`webllm:${m.webllmId}`);
    adapter = report(false, true);
    expect(m.webllmId).toBe('Qwen2.5-1.5B-Instruct-q4f16_1-MLC');
    m.choose('Qwen2.5-0.5B-Instruct-q4f32_1-MLC');
    adapter = report(true);
    expect(m.webllmId).toBe('Qwen2.5-0.5B-Instruct-q4f32_1-MLC');
  });
});
