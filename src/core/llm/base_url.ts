/**
 * What a server's base URL says before any call is made: whether it carries credentials (never sent,
 * never written: they would land in every error message and so in the run's records), and whether
 * the server needs a key (a hosted API does; a server on this computer or this network does not).
 * Pure; the CLI (`spade run`, `spade chat`), the openai backend and the app's Models and Run panels
 * read it.
 */

/**
 * Hosts of hosted OpenAI-compatible APIs that answer nothing without a key: the app's hosted routes
 * (state/models.svelte.ts SERVER_PRESETS: OpenAI, OpenRouter, Groq, Together) and other well-known
 * providers. A call to them without a key can only fail with 401.
 */
const HOSTED_API_HOSTS: readonly string[] = [
  'api.openai.com',
  'openrouter.ai',
  'api.groq.com',
  'api.together.xyz',
  'api.mistral.ai',
  'api.deepseek.com',
  'api.fireworks.ai',
  'api.deepinfra.com',
  'generativelanguage.googleapis.com',
];

/** `scheme://userinfo@`: the part of a URL that carries a user name and password. */
const USERINFO = /\b([a-z][a-z0-9+.-]*:\/\/)[^/\s?#@]*@/gi;

/** `text` with the user name and password of every URL in it replaced by `***`. */
export function redactUrlCredentials(text: string): string {
  return text.replace(USERINFO, '$1***@');
}

/** `url` without its user name and password (what may be saved of a URL a user typed with them). */
export function withoutUrlCredentials(url: string): string {
  return url.replace(USERINFO, '$1');
}

/**
 * The URL with its credentials shown as `***` when `url` carries a user name or password
 * (`http://user:pass@host/v1`, `http://token@host/v1`, percent-encoded or not), else null.
 */
export function urlWithCredentials(url: string): string | null {
  const redacted = redactUrlCredentials(url.trim());
  return redacted === url.trim() ? null : redacted;
}

/**
 * The first URL with credentials anywhere in `text` (a settings file, a recording's header), shown
 * redacted, or null.
 */
export function findUrlWithCredentials(text: string): string | null {
  const m = new RegExp(USERINFO.source, 'i').exec(text);
  if (!m) return null;
  const rest = /^[^\s"'<>]*/.exec(text.slice(m.index + m[0].length))![0];
  return `${m[1]}***@${rest}`;
}

/** The message for a base URL that carries credentials: where the key goes instead. */
export function credentialsInUrlMessage(redacted: string, keyWhere: string): string {
  return (
    `The base URL carries a user name or password (${redacted}). They are not sent, and would be written ` +
    `into the run's records with every error message. Remove them from the URL and give the key as ${keyWhere} ` +
    '(sent as "Authorization: Bearer KEY" to that server only, never written to the run).'
  );
}

/** A host on this computer or a private network (no key expected), by name or address. */
function isLocalHost(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '').toLowerCase();
  if (h === 'localhost' || h.endsWith('.localhost') || h.endsWith('.local') || h === '::1' || h === '0.0.0.0')
    return true;
  if (/^(fc|fd)[0-9a-f]{2}:/.test(h) || h.startsWith('fe80:')) return true;
  const v4 = /^(\d+)\.(\d+)\.\d+\.\d+$/.exec(h);
  if (!v4) return !h.includes('.') && !h.includes(':'); // a bare name: this network's
  const [a, b] = [Number(v4[1]), Number(v4[2])];
  return a === 127 || a === 10 || (a === 192 && b === 168) || (a === 172 && b >= 16 && b <= 31) || a === 169;
}

/**
 * Whether a server at `baseURL` needs an API key: 'required' for a known hosted API (a call without
 * one fails with 401), 'none' for this computer or a private network (Ollama, llama.cpp, vLLM need
 * none unless started with one), 'likely' for any other host.
 */
export function keyNeed(baseURL: string): 'required' | 'likely' | 'none' {
  let host: string;
  try {
    host = new URL(baseURL).hostname.toLowerCase();
  } catch {
    return 'likely';
  }
  if (HOSTED_API_HOSTS.some((h) => host === h || host.endsWith(`.${h}`))) return 'required';
  return isLocalHost(host) ? 'none' : 'likely';
}
