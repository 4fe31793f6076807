/**
 * Comlink wiring shared by every worker and its clients, in the browser (Web
 * Workers) and in Node (worker_threads). Errors keep their class across the
 * boundary: they travel as {name, message, data} and are rebuilt on the other side.
 */
import * as Comlink from 'comlink';
import nodeEndpoint from 'comlink/dist/esm/node-adapter.mjs';
import { deserializeError, serializeError, type SerializedError } from '../core/errors.ts';

Comlink.transferHandlers.set('throw', {
  canHandle: (value: unknown): value is unknown => typeof value === 'object' && value !== null && 'value' in value,
  serialize: (thrown: unknown) => [serializeError((thrown as { value: unknown }).value), []],
  deserialize: (rec: unknown) => {
    throw deserializeError(rec as SerializedError);
  },
} as Comlink.TransferHandler<unknown, SerializedError>);

type NodeParentPort = Parameters<typeof nodeEndpoint>[0];

/** Expose `api` from inside a worker, whichever runtime hosts it. */
export function exposeApi(api: object): void {
  const g = globalThis as { WorkerGlobalScope?: unknown; process?: { getBuiltinModule(id: string): unknown } };
  if (typeof g.WorkerGlobalScope !== 'undefined') {
    Comlink.expose(api);
    return;
  }
  // Node worker_threads; getBuiltinModule keeps bundlers from resolving a Node import.
  const wt = g.process!.getBuiltinModule('node:worker_threads') as { parentPort: NodeParentPort | null };
  if (!wt.parentPort) throw new Error('exposeApi: not running inside a worker');
  Comlink.expose(api, nodeEndpoint(wt.parentPort));
}

export { Comlink, nodeEndpoint };
