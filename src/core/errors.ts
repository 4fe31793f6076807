/**
 * Named error classes shared by every layer. Each message says what happened and
 * what to do. Errors cross worker boundaries as plain `{name, message, data}`
 * objects (serializeError) and are rebuilt into the same class on the other side
 * (deserializeError), so `instanceof` keeps working after a postMessage.
 */
import { ownField } from './schema.ts';

export type ErrorData = Record<string, unknown>;

export class SpadeError extends Error {
  readonly data: ErrorData;
  constructor(message: string, data: ErrorData = {}) {
    super(message);
    this.data = data;
  }
}

/** A config or user setting is invalid. data.issues lists each problem. */
export class ConfigError extends SpadeError {}
/** A stored record could not be read or written. */
export class StorageError extends SpadeError {}
/** A stored record that is not what the app wrote (not JSON, or not its schema): it is set aside, never thrown at a panel. */
export class DamagedRecordError extends StorageError {}
/** WebGPU is missing, or the adapter/device could not be acquired. */
export class WebGpuUnavailableError extends SpadeError {}
/** The GPU device was lost mid-run (driver reset, tab backgrounded, out of memory). */
export class DeviceLostError extends SpadeError {}
/** The GPU reported an error (a shader failed to compile, a binding was invalid). */
export class GpuError extends SpadeError {}
/** A share link or imported file is malformed, too big or hostile. */
export class ShareLinkError extends SpadeError {}
/** An env set file is malformed or of an unknown version. */
export class EnvSetError extends SpadeError {}
/** A run file (spade-run) is malformed, too big, hostile or of an unknown version. */
export class RunFileError extends SpadeError {}
/** Generated environment code broke the contract (wrong shapes, bad reward, ...). */
export class EnvContractError extends SpadeError {}
/** Environment code ran past its time budget and was interrupted. */
export class SandboxTimeoutError extends SpadeError {}
/** Environment code exceeded its memory or stack limit. */
export class SandboxMemoryError extends SpadeError {}
/** Environment code threw (or failed to load). */
export class SandboxRuntimeError extends SpadeError {}
/** A worker died or stopped answering; it has been replaced. */
export class WorkerCrashedError extends SpadeError {}
/** An agent's action was refused before the environment saw it (too long or too deeply nested). */
export class ActionRejectedError extends SpadeError {}
/** A model failed to load (download, unsupported GPU, out of memory); the message suggests what to try. */
export class ModelLoadError extends SpadeError {}
/** A safetensors file is malformed, truncated or hostile (data.code says which). */
export class SafetensorsError extends ModelLoadError {
  get code(): string {
    return String(this.data.code);
  }
}
/** A call the engine's state does not allow yet: no model loaded, no adapter to train or export, no tokenizer to chat. */
export class EngineStateError extends SpadeError {}
/** A model's forward pass gave NaN or infinite logits (broken weights, adapter or config); data.row, data.id say where. */
export class NonFiniteLogitsError extends SpadeError {}
/** A model call failed (server error, bad reply, timeout) after any retries. */
export class ModelCallError extends SpadeError {}
/** A prompt cannot fit the model's context window with room for a useful reply: the call was not sent. */
export class ContextBudgetError extends SpadeError {}
/** A replayed transcript has no recorded reply for this request. */
export class ReplayMismatchError extends SpadeError {}
/** Bad command-line usage (exit code 2). */
export class UsageError extends SpadeError {}
/** A FIFO, device, socket or directory was named where a file is read: refused before any read. */
export class SpecialFileError extends StorageError {}
/** A file holds more than the bound read of it (counted on the bytes actually read, not on stat). */
export class FileTooLargeError extends StorageError {}
/**
 * A file (or folder) where a run directory is written is a symbolic link or has another hard link:
 * nothing is written through it (data.path, data.kind: 'symbolic link' | 'hard link').
 */
export class LinkedFileError extends StorageError {}
/** `spade serve` refused a request whose Host names another server (e.g. a page's DNS rebinding). */
export class HostRefusedError extends SpadeError {}
/** `spade serve` refused a request from a browser page on an origin it does not allow. */
export class OriginRefusedError extends SpadeError {}

const REGISTRY: Record<string, new (message: string, data?: ErrorData) => SpadeError> = {
  SpadeError,
  ConfigError,
  StorageError,
  DamagedRecordError,
  WebGpuUnavailableError,
  DeviceLostError,
  GpuError,
  ShareLinkError,
  EnvSetError,
  RunFileError,
  EnvContractError,
  SandboxTimeoutError,
  SandboxMemoryError,
  SandboxRuntimeError,
  WorkerCrashedError,
  ActionRejectedError,
  ModelLoadError,
  SafetensorsError,
  EngineStateError,
  NonFiniteLogitsError,
  ModelCallError,
  ContextBudgetError,
  ReplayMismatchError,
  UsageError,
  SpecialFileError,
  FileTooLargeError,
  LinkedFileError,
  HostRefusedError,
  OriginRefusedError,
};

// Names live on the prototypes, from the registry's string keys, so they survive minification
// (a bundler renames classes; `new.target.name` would then send "j" across a worker).
for (const [name, Cls] of Object.entries(REGISTRY)) {
  Object.defineProperty(Cls.prototype, 'name', { value: name, writable: true, configurable: true, enumerable: false });
}

/** The error an aborted operation rejects with: the signal's reason, or a standard AbortError. */
export function abortError(signal?: AbortSignal, message = 'The operation was aborted.'): Error {
  const r: unknown = signal?.reason;
  return r instanceof Error ? r : new DOMException(message, 'AbortError');
}

export interface SerializedError {
  name: string;
  message: string;
  data: ErrorData;
}

/** Turn anything thrown into a structured-clone-safe record. */
export function serializeError(err: unknown): SerializedError {
  if (err instanceof SpadeError) {
    return { name: err.name, message: err.message, data: JSON.parse(JSON.stringify(err.data ?? {})) };
  }
  if (err instanceof Error) return { name: err.name || 'Error', message: err.message, data: {} };
  return { name: 'Error', message: String(err), data: {} };
}

/** Rebuild the named class; unknown names become a plain Error with that name. */
export function deserializeError(rec: SerializedError): Error {
  // own keys only: a worker's 'constructor' or 'toString' is no class of ours
  const Cls = ownField(REGISTRY, rec.name);
  if (Cls) return new Cls(rec.message, rec.data);
  const e = new Error(rec.message);
  e.name = rec.name;
  return e;
}
