// Entry point of the server process that `slipway server` supervises (run by its supervisor, not by hand).
import { runServerWorker } from './server-command.js';

runServerWorker().catch((err: unknown) => {
  process.stderr.write(`slipway: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
