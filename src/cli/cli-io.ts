// The CLI's outside world (streams, environment, working directory, Ctrl-C), injectable for tests.
import type { Readable, Writable } from 'node:stream';
import { loadClientEnv, type ClientEnv } from '../config.js';

/** A writable stream that may be a terminal. */
export type OutStream = Writable & { isTTY?: boolean; columns?: number };
/** A readable stream that may be a terminal. */
export type InStream = Readable & { isTTY?: boolean; setRawMode?: (mode: boolean) => unknown };

export interface CliIo {
  readonly stdout: OutStream;
  readonly stderr: OutStream;
  readonly stdin: InStream;
  /** SLIPWAY_URL, SLIPWAY_API_KEY and the config directory. */
  readonly env: ClientEnv;
  /** Directory relative paths (e.g. `deploy`'s DIR) are resolved from. */
  readonly cwd: string;
  /**
   * Subscribes to Ctrl-C for the duration of a command; returns the unsubscribe function.
   * Only client commands listen, so `server` (and `tunnel`) keep their own signal handling.
   */
  onInterrupt(listener: () => void): () => void;
}

/** The real process: its streams, its environment (parsed in config.ts), its SIGINT. */
export function processIo(): CliIo {
  // `slipway --help | head`: the reader went away, so nothing more can be shown; end quietly, as
  // other Unix tools do, rather than with a stack trace.
  process.stdout.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code === 'EPIPE') process.exit(0);
    throw err;
  });
  return {
    stdout: process.stdout,
    stderr: process.stderr,
    stdin: process.stdin,
    env: loadClientEnv(),
    cwd: process.cwd(),
    onInterrupt(listener) {
      process.on('SIGINT', listener);
      return () => process.off('SIGINT', listener);
    },
  };
}
