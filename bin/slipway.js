#!/usr/bin/env node
// Entry point of the `slipway` program (server and CLI): runs the compiled CLI.
import { runCli } from '../dist/src/cli/main.js';

runCli(process.argv).catch((err) => {
  process.stderr.write(`slipway: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
