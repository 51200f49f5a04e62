// `npm start`: install what is missing, compile, bring up Docker, run `slipway server` (restarted if it ever dies).
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { root, ensureDependencies, compile, ensureDocker, ensureHaproxy, ensureRegistry } from './setup.mjs';
import { ensureExampleBase } from './example-base.mjs';

await ensureDependencies();
compile();
ensureHaproxy();
// Under swarm without SLIPWAY_REGISTRY: Debian's registry, which the server runs itself.
ensureRegistry();
if (await ensureDocker({ required: false })) await ensureExampleBase().catch((err) => process.stderr.write(`[setup] examples base image: ${err.message}\n`));
// `slipway server` supervises the server process itself; this outer supervisor restarts `slipway
// server` should it die as a whole (kill -9), and passes SIGINT/SIGTERM on for a clean stop.
const { supervise } = await import(pathToFileURL(path.join(root, 'dist', 'src', 'cli', 'supervisor.js')).href);
process.exitCode = await supervise({
  entry: path.join(root, 'bin', 'slipway.js'),
  args: ['server', ...process.argv.slice(2)],
  // A small V8 young generation keeps the server's memory low (peak < 200 MiB during a 1 GiB upload)
  // for a few percent of request throughput; see bench/README.md. The server process inherits it.
  execArgv: ['--max-semi-space-size=2'],
  what: '`slipway server`',
});
