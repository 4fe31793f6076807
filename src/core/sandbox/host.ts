/** Placeholder: replaced by the QuickJS host below in the Environments work. */
import { newQuickJSWASMModuleFromVariant } from 'quickjs-emscripten-core';
import variant from '@jitl/quickjs-wasmfile-release-sync';

export async function createSandboxHost() {
  const mod = await newQuickJSWASMModuleFromVariant(variant);
  return {
    ping: () => 'pong',
    evalNumber(code: string): number {
      const ctx = mod.newContext();
      try {
        const r = ctx.evalCode(code);
        const h = ctx.unwrapResult(r);
        const v = ctx.getNumber(h);
        h.dispose();
        return v;
      } finally {
        ctx.dispose();
      }
    },
  };
}
export type SandboxHost = Awaited<ReturnType<typeof createSandboxHost>>;
