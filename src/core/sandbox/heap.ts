/**
 * The QuickJS WASM module the sandbox host runs, with its heap watched at the two places that
 * cost nothing until memory is actually taken:
 *
 * - Heap growth. The module runs on a WebAssembly.Memory made here, whose `grow` asks the host
 *   first (`onGrow`). Emscripten's allocator grows the heap through that method and nothing else,
 *   so the host sees every growth as it happens, inside the allocation, and can refuse it: the
 *   allocation then fails in the guest as QuickJS's "out of memory". A memory limit enforced there
 *   fires on memory, however slowly the machine allocates.
 * - Each runtime's live allocation count. QuickJS keeps it in its runtime struct (JSMallocState's
 *   malloc_count); reading it is one load from WASM memory. Where the layout is not the one this
 *   build has (checked per runtime), the count is unavailable and the host does without it.
 *
 * Pure: WebAssembly is a language global, here as in browsers, workers and Node.
 */
import {
  newQuickJSWASMModuleFromVariant,
  newVariant,
  type QuickJSRuntime,
  type QuickJSWASMModule,
} from 'quickjs-emscripten-core';
import variant from '@jitl/quickjs-wasmfile-release-sync';

const PAGE = 65536;
/** Emscripten's defaults for this build: a 16 MiB heap at start that may grow to 2 GiB. */
const INITIAL_PAGES = (16 * 2 ** 20) / PAGE;
const MAXIMUM_PAGES = (2 * 2 ** 30) / PAGE;

/**
 * Decides a heap growth from `fromBytes` to `toBytes`: true lets it happen, false refuses it (the
 * allocation that asked for it fails). Called inside the allocator: it must only read and set
 * plain fields, never call into the module.
 */
export type GrowthPolicy = (fromBytes: number, toBytes: number) => boolean;

export interface WatchedModule {
  module: QuickJSWASMModule;
  memory: WebAssembly.Memory;
}

/**
 * A fresh QuickJS module whose every heap growth goes through `policy` first. `compiled`, when
 * given, is QuickJS's WASM already compiled (quickjsWasm in platform/node/sandbox_pool.ts): the new
 * instance then shares its machine code with every other instance of it in the process, instead of
 * compiling QuickJS's functions again as they are first called.
 */
export async function newWatchedModule(policy: GrowthPolicy, compiled?: WebAssembly.Module): Promise<WatchedModule> {
  const memory = new WebAssembly.Memory({ initial: INITIAL_PAGES, maximum: MAXIMUM_PAGES });
  const grow = memory.grow.bind(memory);
  Object.defineProperty(memory, 'grow', {
    value(pages: number): number {
      const from = memory.buffer.byteLength;
      // a throw is how the allocator's grow attempt fails: it then reports out of memory
      if (!policy(from, from + pages * PAGE)) throw new RangeError('heap growth refused by the sandbox host');
      return grow(pages);
    },
  });
  const module = await newQuickJSWASMModuleFromVariant(
    newVariant(variant, { wasmMemory: memory, ...(compiled ? { wasmModule: compiled } : {}) }),
  );
  return { module, memory };
}

/** Where QuickJS's JSMallocState sits in its runtime struct (after four 32-bit allocator pointers). */
const MALLOC_COUNT = 16;
const MALLOC_SIZE = 20;
const MALLOC_LIMIT = 24;
/** This build cannot see allocation sizes, so QuickJS counts each live allocation as 8 bytes. */
const BYTES_PER_ALLOCATION = 8;

/**
 * A reader of `runtime`'s live allocation count, or null when the struct does not look as this
 * build lays it out (its malloc_limit must read back as `limitBytes`, just set, and its malloc_size
 * must be 8 bytes per allocation). Call it only while the runtime is alive.
 */
export function allocationCounter(
  memory: WebAssembly.Memory,
  runtime: QuickJSRuntime,
  limitBytes: number,
): (() => number) | null {
  const pointer = (runtime as unknown as { rt?: { value?: unknown } }).rt?.value;
  if (typeof pointer !== 'number' || pointer <= 0 || pointer % 4 !== 0) return null;
  let words = new Uint32Array(memory.buffer);
  const at = (offset: number) => {
    if (words.buffer !== memory.buffer) words = new Uint32Array(memory.buffer); // the heap grew
    return words[(pointer + offset) >>> 2]!;
  };
  if (at(MALLOC_LIMIT) !== limitBytes >>> 0) return null;
  const count = at(MALLOC_COUNT);
  if (count === 0 || at(MALLOC_SIZE) !== count * BYTES_PER_ALLOCATION) return null;
  return () => at(MALLOC_COUNT);
}
