/**
 * WebLLM download progress: turns web-llm's InitProgressReport (a fraction and a line of text) into a
 * stage, a whole percent, bytes and an ETA that a progress bar can show. Pure TypeScript; only types
 * come from @mlc-ai/web-llm.
 */
import type { InitProgressReport } from '@mlc-ai/web-llm';

type DownloadStage = 'preparing' | 'fetching' | 'loading' | 'shaders' | 'done';

export interface DownloadProgress {
  /** 0..100, whole numbers, of the current stage. */
  percent: number;
  stage: DownloadStage;
  /** web-llm's own line, for a tooltip or log. */
  text: string;
  /** Bytes of weights fetched (stage fetching) or uploaded to the GPU (stage loading). */
  bytesLoaded?: number;
  /** Total bytes of weights: the caller's figure, else estimated from bytesLoaded / progress. */
  bytesTotal?: number;
  /** Seconds left in this stage, from the rate so far (fetching and loading only). */
  etaSeconds?: number;
  elapsedSeconds: number;
}

function stageOf(text: string, progress: number): DownloadStage {
  if (/^Fetching param cache|^Start to fetch params/i.test(text)) return 'fetching';
  if (/^Loading model from cache/i.test(text)) return 'loading';
  if (/^Loading GPU shader modules/i.test(text)) return 'shaders';
  if (/^Finish loading/i.test(text) || (progress >= 1 && text === '')) return 'done';
  return 'preparing';
}

/**
 * Turn web-llm's InitProgressReport into numbers a progress bar can show. `startedAt` and `now` are
 * milliseconds on the same clock; `totalBytes` is the size of the weights when the caller knows it.
 * web-llm's text carries megabytes ("Fetching param cache[3/24]: 120MB fetched. 40% completed, ..."),
 * read here as MiB.
 */
export function formatDownloadProgress(
  report: InitProgressReport,
  startedAt: number,
  now: number,
  totalBytes?: number,
): DownloadProgress {
  const raw = Number.isFinite(report.progress) ? report.progress : 0;
  const progress = Math.min(1, Math.max(0, raw));
  const text = report.text ?? '';
  const stage = stageOf(text, progress);
  const elapsedSeconds = Math.max(0, (now - startedAt) / 1000);
  const out: DownloadProgress = {
    percent: stage === 'done' ? 100 : Math.floor(progress * 100),
    stage,
    text,
    elapsedSeconds,
  };
  const m = /(\d+(?:\.\d+)?)\s*MB (?:fetched|loaded)/i.exec(text);
  if (m) out.bytesLoaded = Math.round(Number(m[1]) * 2 ** 20);
  else if (totalBytes !== undefined && (stage === 'fetching' || stage === 'loading'))
    out.bytesLoaded = Math.round(progress * totalBytes);
  if (totalBytes !== undefined && totalBytes > 0) out.bytesTotal = totalBytes;
  else if (out.bytesLoaded !== undefined && progress >= 0.01) out.bytesTotal = Math.round(out.bytesLoaded / progress);
  if ((stage === 'fetching' || stage === 'loading') && progress > 0 && progress < 1 && elapsedSeconds > 0) {
    out.etaSeconds = Math.round((elapsedSeconds * (1 - progress)) / progress);
  }
  return out;
}
