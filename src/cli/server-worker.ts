// Entry point of the server process that `slipway server` supervises (started by its supervisor, not by hand).
import { loadServerConfigOrExit } from './load-server-config.js';
import { ConfigError } from '../config.js';
import { startServer } from '../main.js';
import { EXIT_CANNOT_START, installWorkerGuards } from './supervisor.js';

/** The supervised server process: starts the server from the environment; prints where it listens and a generated admin password. */
async function runServerWorker(): Promise<void> {
  installWorkerGuards();
  const config = loadServerConfigOrExit();
  let server;
  try {
    server = await startServer(config);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (err instanceof ConfigError || code === 'EADDRINUSE' || code === 'HAPROXY_START_FAILED' || code === 'DATABASE_TOO_NEW') {
      process.stderr.write(`slipway: cannot start: ${err instanceof Error ? err.message : String(err)}\n`);
      process.exit(EXIT_CANNOT_START);
    }
    throw err;
  }
  const out = process.stdout;
  out.write(`Slipway is listening on ${server.url} (apps at http://<subdomain>.${config.domain}:${server.port}/)\n`);
  out.write(`Data plane: ${server.dataPlane === 'haproxy' ? `HAProxy (pid ${server.haproxyPid() ?? '?'}), Node behind it on loopback` : 'Node'}\n`);
  if (server.httpsPort !== undefined) out.write(`HTTPS on port ${server.httpsPort}: certificates are obtained for the API host, live apps and custom domains\n`);
  out.write(`Data directory: ${config.dataDir}\n`);
  if (server.generatedAdmin !== undefined) {
    out.write('\nFirst start: an administrator was created. This password is shown only once:\n');
    out.write(`  email:    ${server.generatedAdmin.email}\n  password: ${server.generatedAdmin.password}\n\n`);
  }
  let stopping = false;
  const stop = (signal: string): void => {
    if (stopping) return;
    stopping = true;
    out.write(`\n${signal}: shutting down…\n`);
    const force = setTimeout(() => process.exit(1), 15_000);
    force.unref();
    server.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
}

runServerWorker().catch((err: unknown) => {
  process.stderr.write(`slipway: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
