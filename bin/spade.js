#!/usr/bin/env node
// The `spade` command: registers the TypeScript loader (for this process and the worker threads it
// starts), then runs src/cli/spade.ts.
import './ts_loader.js';

const { main } = await import('../src/cli/spade.ts');
process.exitCode = await main(process.argv.slice(2));
