// A small supervisor: runs a worker process, restarts it with backoff when it dies, and says why it died.
import { fork, type ChildProcess } from 'node:child_process';

/** Exit code a worker uses for a failure a restart cannot fix (bad configuration, port taken): no restart. */
export const EXIT_CANNOT_START = 2;

/** What a worker tells its supervisor, over the IPC channel, just before it exits on a crash. */
interface CrashMessage {
  type: 'slipway-crash';
  error: string;
}

export interface SupervisorOptions {
  /** The worker's entry module (a file path). */
  entry: string;
  /** Arguments for the worker. */
  args?: string[];
  /** Node flags for the worker (default: this process's own). */
  execArgv?: string[];
  /** What the log lines call the worker (default "server process"). */
  what?: string;
  /** Where the supervisor's own lines go (default: stderr). */
  log?: (line: string) => void;
  /** First restart delay; doubled after each quick death up to `maxBackoffMs` (defaults 500 ms, 30 s). */
  minBackoffMs?: number;
  maxBackoffMs?: number;
  /** A worker that ran this long before dying restarts after the first delay again (default 60 s). */
  stableAfterMs?: number;
  /** How long a stopping worker has before it is killed (default 20 s). */
  stopTimeoutMs?: number;
  /** Stops the supervisor (and its worker, cleanly) when aborted; SIGINT/SIGTERM do the same. */
  signal?: AbortSignal;
}

/**
 * Runs `entry` as a child process (Node, with this process's exec flags and an IPC channel) and
 * keeps it running: an exit the supervisor did not ask for (a crash, a signal, a kill -9) is logged
 * with its code or signal and the worker's last error, and the worker is started again after a
 * backoff. SIGINT/SIGTERM are passed to the worker, which stops cleanly; the supervisor then resolves
 * with the worker's exit code. A worker exiting with {@link EXIT_CANNOT_START}, or with 0 on its own,
 * is not restarted.
 */
export function supervise(options: SupervisorOptions): Promise<number> {
  const log = options.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  const minBackoff = options.minBackoffMs ?? 500;
  const maxBackoff = options.maxBackoffMs ?? 30_000;
  const stableAfter = options.stableAfterMs ?? 60_000;
  const stopTimeout = options.stopTimeoutMs ?? 20_000;
  const what = options.what ?? 'server process';

  return new Promise<number>((resolve) => {
    let child: ChildProcess | undefined;
    let stopping = false;
    let backoff = minBackoff;
    let restartTimer: NodeJS.Timeout | undefined;
    let killTimer: NodeJS.Timeout | undefined;

    const finish = (code: number): void => {
      clearTimeout(restartTimer);
      clearTimeout(killTimer);
      process.off('SIGINT', onSigint);
      process.off('SIGTERM', onSigterm);
      options.signal?.removeEventListener('abort', onAbort);
      resolve(code);
    };

    const start = (): void => {
      const startedAt = Date.now();
      let lastError: string | undefined;
      const worker = fork(options.entry, options.args ?? [], {
        stdio: ['inherit', 'inherit', 'inherit', 'ipc'],
        execArgv: options.execArgv ?? process.execArgv,
      });
      child = worker;
      log(`[slipway] supervisor: ${what} ${worker.pid ?? '?'} started`);
      worker.on('message', (message: unknown) => {
        if (isCrashMessage(message)) lastError = message.error;
      });
      worker.on('error', (err) => log(`[slipway] supervisor: ${what} error: ${err.message}`));
      worker.once('exit', (code, signal) => {
        child = undefined;
        if (stopping) return finish(code ?? 1);
        const how = signal !== null ? `was killed by ${signal}` : `exited with code ${code ?? '?'}`;
        const why = lastError === undefined ? '' : ` after an uncaught error: ${lastError}`;
        if (code === EXIT_CANNOT_START || code === 0) {
          log(`[slipway] supervisor: ${what} ${worker.pid ?? '?'} ${how}${why}; not restarting`);
          return finish(code);
        }
        if (Date.now() - startedAt >= stableAfter) backoff = minBackoff;
        log(`[slipway] supervisor: ${what} ${worker.pid ?? '?'} ${how}${why}; restarting in ${backoff} ms`);
        restartTimer = setTimeout(start, backoff);
        backoff = Math.min(maxBackoff, backoff * 2);
      });
    };

    const stop = (signal: NodeJS.Signals): void => {
      if (stopping) return;
      stopping = true;
      if (child === undefined) return finish(0);
      child.kill(signal);
      killTimer = setTimeout(() => child?.kill('SIGKILL'), stopTimeout);
    };
    const onSigint = (): void => stop('SIGINT');
    const onSigterm = (): void => stop('SIGTERM');
    const onAbort = (): void => stop('SIGTERM');
    process.on('SIGINT', onSigint);
    process.on('SIGTERM', onSigterm);
    options.signal?.addEventListener('abort', onAbort, { once: true });
    start();
  });
}

/**
 * For a worker: an uncaught exception (or unhandled rejection) is logged with its stack, reported to
 * the supervisor, and ends the process with code 1, since its state can no longer be trusted; the
 * supervisor starts a fresh one. When the supervisor itself goes away (its IPC channel closes, e.g.
 * it was killed), the worker exits at once rather than run on unsupervised.
 */
export function installWorkerGuards(log: (line: string) => void = (line) => process.stderr.write(`${line}\n`)): void {
  process.on('uncaughtException', (err: unknown) => {
    const detail = err instanceof Error ? (err.stack ?? `${err.name}: ${err.message}`) : String(err);
    log(`[slipway] error: uncaught exception, the server process exits: ${detail}`);
    const message: CrashMessage = { type: 'slipway-crash', error: err instanceof Error ? `${err.name}: ${err.message}` : String(err) };
    if (process.send !== undefined && process.connected) {
      process.send(message, undefined, undefined, () => process.exit(1));
      // Should the channel not flush, do not linger.
      setTimeout(() => process.exit(1), 1000).unref();
    } else {
      process.exit(1);
    }
  });
  if (process.send !== undefined) process.once('disconnect', () => process.exit(1));
}

function isCrashMessage(message: unknown): message is CrashMessage {
  return typeof message === 'object' && message !== null && (message as { type?: unknown }).type === 'slipway-crash';
}
