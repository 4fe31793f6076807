// The TypeScript loader, for running the sources as they are in Node: tsx for .ts, plus a tiny hook
// (raw_loader.js) that imports `file?raw` as a string, as Vite does. Registered by the entry points
// only: bin/spade.js imports it first thing, and the worker threads the product starts
// (src/platform/node/workers.ts) get it through `--import` from SPADE_TS_LOADER, which this module
// sets to its own URL (the test runner sets it too, vitest.config.ts). Product code never names it.
import { register } from 'node:module';
import { register as registerTsx } from 'tsx/esm/api';

registerTsx();
register('./raw_loader.js', import.meta.url);
process.env.SPADE_TS_LOADER = import.meta.url;
