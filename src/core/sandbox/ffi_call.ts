/**
 * The host's hot path into QuickJS: a guest function called with one argument, through
 * quickjs-emscripten's FFI with an argument buffer reused per context; a short string made from a
 * text buffer reused per context; and a string check that reads the value's tag instead of asking
 * QuickJS for its typeof. quickjs-emscripten's public API allocates, fills and frees an argument
 * array and a C string on every call, and typeof crosses into QuickJS and back with a C string:
 * together ~30% of a trivial step.
 *
 * It reaches into the pinned quickjs-emscripten 0.32's context internals (its ContextMemory: the
 * FFI, the context pointer, the emscripten module), so oneArgCall checks they are there and that a
 * string's tag reads as this 32-bit build lays it out (NaN-boxed, tag in the high word); where
 * either does not hold it returns null and the host uses the public API. isString answering false
 * only means "ask typeof".
 */
import type { QuickJSContext, QuickJSHandle } from 'quickjs-emscripten-core';

interface Internals {
  module: {
    HEAPU8: Uint8Array;
    _malloc(bytes: number): number;
    _free(ptr: number): void;
    stringToUTF8(s: string, ptr: number, maxBytes: number): number;
  };
  ffi: {
    QTS_NewString(ctx: number, chars: number): number;
    QTS_Call(ctx: number, fn: number, thisVal: number, argc: number, argv: number): number;
    QTS_ResolveException(ctx: number, ptr: number): number;
    QTS_FreeValuePointer(ctx: number, ptr: number): void;
  };
  ctx: { value: number };
  heapValueHandle(ptr: number): QuickJSHandle;
}

/** QuickJS's JS_TAG_STRING. */
const TAG_STRING = -7;
/** The reused text buffer: any string of up to 682 UTF-16 units fits (3 UTF-8 bytes each, and a NUL). */
const TEXT_BYTES = 2048;

export interface OneArgCall {
  /** `fn(arg)` with this = undefined: the same result as context.callFunction. */
  call(
    fn: QuickJSHandle,
    arg: QuickJSHandle,
  ): { value: QuickJSHandle; error?: undefined } | { error: QuickJSHandle; value?: undefined };
  /** context.newString(s), without allocating a C string when `s` fits the reused buffer. */
  newString(s: string): QuickJSHandle;
  /** True when `h` holds a string; false means only that the caller should ask typeof. */
  isString(h: QuickJSHandle): boolean;
  /** Free the argument buffer (not needed once the module itself is discarded). */
  free(): void;
}

export function oneArgCall(context: QuickJSContext): OneArgCall | null {
  const m = (context as unknown as { memory?: Partial<Internals> }).memory;
  const mod = m?.module;
  const ffi = m?.ffi;
  if (
    !m ||
    !mod ||
    !ffi ||
    typeof mod._malloc !== 'function' ||
    typeof mod._free !== 'function' ||
    typeof mod.stringToUTF8 !== 'function' ||
    typeof ffi.QTS_NewString !== 'function' ||
    !(mod.HEAPU8 instanceof Uint8Array) ||
    typeof ffi.QTS_Call !== 'function' ||
    typeof ffi.QTS_ResolveException !== 'function' ||
    typeof ffi.QTS_FreeValuePointer !== 'function' ||
    typeof m.ctx?.value !== 'number' ||
    typeof m.heapValueHandle !== 'function'
  )
    return null;
  const { ctx } = m as Internals;
  const heapValueHandle = (ptr: number) => (m as Internals).heapValueHandle(ptr);
  let words = new Int32Array(mod.HEAPU8.buffer);
  const view = () => (words.buffer === mod.HEAPU8.buffer ? words : (words = new Int32Array(mod.HEAPU8.buffer)));
  const tagOf = (h: QuickJSHandle) => view()[((h.value as unknown as number) + 4) >>> 2];
  // the layout check: a string's tag reads as a string's, a number's and an object's do not
  const probes = [context.newString('probe'), context.newNumber(1.5), context.newObject()];
  const layoutHolds = tagOf(probes[0]!) === TAG_STRING && probes.slice(1).every((h) => tagOf(h) !== TAG_STRING);
  for (const h of probes) h.dispose();
  if (!layoutHolds) return null;
  const argv = mod._malloc(4);
  const text = mod._malloc(TEXT_BYTES);
  let freed = false;
  return {
    newString(s) {
      if (s.length * 3 + 1 > TEXT_BYTES) return context.newString(s);
      mod.stringToUTF8(s, text, TEXT_BYTES);
      return heapValueHandle(ffi.QTS_NewString(ctx.value, text));
    },
    call(fn, arg) {
      view()[argv >>> 2] = arg.value as unknown as number;
      const c = ctx.value;
      const result = ffi.QTS_Call(
        c,
        fn.value as unknown as number,
        context.undefined.value as unknown as number,
        1,
        argv,
      );
      const error = ffi.QTS_ResolveException(c, result);
      if (error) {
        ffi.QTS_FreeValuePointer(c, result);
        return { error: heapValueHandle(error) };
      }
      return { value: heapValueHandle(result) };
    },
    isString: (h) => tagOf(h) === TAG_STRING,
    free() {
      if (!freed) {
        mod._free(argv);
        mod._free(text);
      }
      freed = true;
    },
  };
}
