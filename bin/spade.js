#!/usr/bin/env node
// The `spade` command: registers the TypeScript loader, then runs src/cli/spade.ts.
import '../scripts/register.js';

const { main } = await import('../src/cli/spade.ts');
process.exitCode = await main(process.argv.slice(2));
