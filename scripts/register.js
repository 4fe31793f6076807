// Node loader setup for running the TypeScript sources directly (CLI, worker_threads):
// tsx for .ts, plus a tiny hook that imports `file?raw` as a string (as Vite does).
import { register } from 'node:module';
import { register as registerTsx } from 'tsx/esm/api';

registerTsx();
register('./raw_loader.js', import.meta.url);
