// `slipway server`: run the Slipway server, supervised, in the foreground until SIGINT/SIGTERM.
// Kept apart from the rest of the CLI: the supervising process loads only this, the configuration
// and the supervisor (bin/slipway.js comes straight here), so the server's own start comes sooner.
import { fileURLToPath } from 'node:url';
import { loadServerConfigOrExit } from './load-server-config.js';
import { supervise } from './supervisor.js';

/**
 * `slipway server`: checks the configuration, then runs the server in a supervised child process
 * (see supervisor.ts) that is started again whenever it dies; SIGINT/SIGTERM stop both cleanly.
 */
export async function runServer(): Promise<void> {
  loadServerConfigOrExit();
  const entry = fileURLToPath(new URL('./server-worker.js', import.meta.url));
  // Itself supervised (`npm start`): when that parent goes, stop the server cleanly and go too.
  if (process.send !== undefined) process.once('disconnect', () => process.kill(process.pid, 'SIGTERM'));
  const code = await supervise({ entry });
  // Exit now: an IPC channel to a parent supervisor would otherwise keep this process alive.
  process.exit(code);
}
