// `npm start`: install what is missing, compile, bring up Docker, run `slipway server`.
import { spawn } from 'node:child_process';
import path from 'node:path';
import { root, ensureDependencies, compile, ensureDocker } from './setup.mjs';
import { ensureExampleBase } from './example-base.mjs';

ensureDependencies();
compile();
if (await ensureDocker({ required: false })) await ensureExampleBase().catch((err) => process.stderr.write(`[setup] examples base image: ${err.message}\n`));
// A small V8 young generation keeps the server's memory low (peak < 200 MiB during a 1 GiB upload)
// for a few percent of request throughput; see bench/README.md.
const child = spawn(process.execPath, ['--max-semi-space-size=2', path.join(root, 'bin', 'slipway.js'), 'server', ...process.argv.slice(2)], {
  stdio: 'inherit',
});
for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => child.kill(signal));
child.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
