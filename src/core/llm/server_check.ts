/**
 * The Models panel's server helpers, pure but for the fetch it is given: "test connection" (GET
 * {baseURL}/models: the models the server lists and the context window it reports for the chosen
 * one, or why it could not be reached) and the CORS recipe of each common server for this page's
 * origin (a browser only reads a reply whose server allows the page's origin).
 */
import { credentialsInUrlMessage, redactUrlCredentials, urlWithCredentials } from './base_url.ts';
import { windowFromModelList } from './openai_model.ts';

export interface ConnectionReport {
  ok: boolean;
  /** The model ids the server lists (empty when it could not be read). */
  models: string[];
  /** The window the server reports for `model` (max_model_len, context_length), or null. */
  contextWindow: number | null;
  /** One line in plain words: what was found, or what failed and what to do. */
  message: string;
}

/** GET {baseURL}/models within `timeoutMs`, read as an OpenAI model list. */
export async function testConnection(
  baseURL: string,
  model: string,
  apiKey = '',
  fetchFn: typeof fetch = fetch,
  timeoutMs = 10_000,
): Promise<ConnectionReport> {
  const fail = (message: string): ConnectionReport => ({ ok: false, models: [], contextWindow: null, message });
  if (!/^https?:\/\//.test(baseURL))
    return fail(
      `The base URL must start with http:// or https://, e.g. http://127.0.0.1:8000/v1; got "${redactUrlCredentials(baseURL)}".`,
    );
  const withCredentials = urlWithCredentials(baseURL);
  if (withCredentials) return fail(credentialsInUrlMessage(withCredentials, 'the API key above'));
  const url = `${baseURL.replace(/\/+$/, '')}/models`;
  let res: Response;
  try {
    res = await fetchFn(url, {
      headers: apiKey ? { Authorization: `Bearer ${apiKey}` } : {},
      signal: AbortSignal.timeout(timeoutMs),
    });
  } catch (err) {
    const timedOut = (err as Error).name === 'TimeoutError';
    return fail(
      timedOut
        ? `No answer from ${url} within ${timeoutMs / 1000} s: is the server running and is the URL right (it ends in /v1)?`
        : `Could not reach ${url}: either no server is running there, or it does not allow this page's origin (CORS) — see "Allow this page (CORS)" below for your server.`,
    );
  }
  if (res.status === 401 || res.status === 403)
    return fail(
      `${url} answered HTTP ${res.status}: the server wants an API key (or a different one): enter it above.`,
    );
  if (!res.ok) return fail(`${url} answered HTTP ${res.status}: check that the URL ends in /v1.`);
  let list: unknown;
  try {
    list = await res.json();
  } catch {
    return fail(`${url} did not answer with JSON: is this an OpenAI-compatible server (its URL ends in /v1)?`);
  }
  const data = (list as { data?: unknown } | null)?.data;
  const models = Array.isArray(data)
    ? data.map((e) => (e as { id?: unknown } | null)?.id).filter((id): id is string => typeof id === 'string')
    : [];
  const contextWindow = model ? windowFromModelList(list, model) : null;
  const listed = `${models.length} model${models.length === 1 ? '' : 's'}${models.length ? `: ${models.slice(0, 5).join(', ')}${models.length > 5 ? ', …' : ''}` : ''}`;
  const about = !model
    ? 'Enter one of them as the model.'
    : !models.includes(model)
      ? `"${model}" is not among them: enter one of the listed ids as the model.`
      : contextWindow
        ? `"${model}" serves a context window of ${contextWindow} tokens (reported by the server).`
        : `"${model}" is served; the server does not report its context window: enter the one it was started with.`;
  return { ok: true, models, contextWindow, message: `Connected: ${listed}. ${about}` };
}

export interface CorsRecipe {
  server: string;
  /** The default base URL of that server's OpenAI API. */
  baseURL: string;
  /** What to run or set so the browser may read its replies from `origin`. */
  recipe: string;
}

/** How each common server is told to allow `origin` (this page's), with its default base URL. */
export function corsRecipes(origin: string): CorsRecipe[] {
  return [
    {
      server: 'vLLM',
      baseURL: 'http://127.0.0.1:8000/v1',
      recipe: `allows every origin unless started with --allowed-origins; then add this page: vllm serve MODEL --allowed-origins '["${origin}"]'`,
    },
    {
      server: 'Ollama',
      baseURL: 'http://127.0.0.1:11434/v1',
      recipe: `refuses pages it does not know: start it as OLLAMA_ORIGINS=${origin} ollama serve (or set OLLAMA_ORIGINS for its service), and enter num_ctx as the window`,
    },
    {
      server: 'llama.cpp',
      baseURL: 'http://127.0.0.1:8080/v1',
      recipe:
        'llama-server answers any origin: llama-server -m MODEL.gguf --port 8080 -c 8192 (enter the -c value as the window)',
    },
    {
      server: 'SGLang',
      baseURL: 'http://127.0.0.1:30000/v1',
      recipe: 'allows every origin: python -m sglang.launch_server --model-path MODEL --port 30000',
    },
  ];
}
