// Types of scripts/page_load_cost.js's exports, for tests/e2e/browser.ts.

/** Chromium's flags for WebGPU on a machine without a GPU, in a closed network. */
export declare const CHROMIUM_ARGS: string[];
