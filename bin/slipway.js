#!/usr/bin/env node
// Entry point of the `slipway` program (server and CLI): runs the compiled CLI.
// Plain `slipway server` loads only the supervisor (a fifth of a second of CPU less than the whole
// CLI before the server's own start); everything else, `server --help` included, goes through the CLI.
const serverOnly = process.argv.length === 3 && process.argv[2] === 'server';
const run = serverOnly
  ? import('../dist/src/cli/server-run.js').then(({ runServer }) => runServer())
  : import('../dist/src/cli/main.js').then(({ runCli }) => runCli(process.argv));

run.catch((err) => {
  process.stderr.write(`slipway: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
