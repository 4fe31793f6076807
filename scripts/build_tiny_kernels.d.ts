// Types of scripts/build_tiny_kernels.js for the tests that import it.
/** tiny_kernels_wasm.ts as the .wat compiles now. */
export function generate(): Promise<string>;
