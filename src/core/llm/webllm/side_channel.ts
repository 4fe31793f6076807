/**
 * The worker side-channel: the one message workers/llm.worker.ts posts beside web-llm's own protocol,
 * and the guard the main thread uses to filter it out before web-llm's client sees it.
 */

/**
 * A message workers/llm.worker.ts posts beside web-llm's own protocol when the GPU device it
 * handed to web-llm is lost. The main thread filters it out before web-llm's client sees it.
 */
export interface WebLlmDeviceLostMessage {
  kind: 'spade:device-lost';
  reason: string;
  message: string;
}

export function isDeviceLostMessage(v: unknown): v is WebLlmDeviceLostMessage {
  return typeof v === 'object' && v !== null && (v as { kind?: unknown }).kind === 'spade:device-lost';
}
