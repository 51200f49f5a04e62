// Questions on the terminal (secrets not echoed) or, when stdin is not a TTY, answers read line by line from stdin.
import readline from 'node:readline';
import { Writable } from 'node:stream';
import { CliError, EXIT_INTERRUPTED } from './cli-error.js';
import type { CliIo } from './cli-io.js';

/** Asks questions; close() releases stdin so the process can exit. */
export interface Prompter {
  ask(question: string, options?: { secret?: boolean }): Promise<string>;
  close(): void;
}

/**
 * One reader for all the questions of a command: piped stdin may deliver several answers in one
 * chunk, so a fresh readline per question would lose them. Prompts go to stderr, so stdout stays
 * clean for `--json`.
 */
export function createPrompter(io: CliIo, signal: AbortSignal): Prompter {
  const tty = io.stdin.isTTY === true;
  let muted = false;
  // On a terminal readline echoes what is typed through `output`; muting it hides a password.
  const output = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      if (!muted) io.stderr.write(chunk);
      callback();
    },
  });
  let rl: readline.Interface | undefined;
  const lines: string[] = [];
  const waiters: Array<{ resolve: (line: string | undefined) => void }> = [];
  let closed = false;

  const open = (): readline.Interface => {
    if (rl !== undefined) return rl;
    rl = readline.createInterface({ input: io.stdin, output, terminal: tty });
    rl.on('line', (line) => {
      const waiter = waiters.shift();
      if (waiter !== undefined) waiter.resolve(line);
      else lines.push(line);
    });
    rl.on('close', () => {
      closed = true;
      for (const waiter of waiters.splice(0)) waiter.resolve(undefined);
    });
    // Raw mode turns Ctrl-C into a readline event instead of a signal.
    rl.on('SIGINT', () => {
      for (const waiter of waiters.splice(0)) waiter.resolve(undefined);
      onAbort();
    });
    return rl;
  };
  let interrupted = false;
  const onAbort = (): void => {
    interrupted = true;
    for (const waiter of waiters.splice(0)) waiter.resolve(undefined);
  };
  signal.addEventListener('abort', onAbort, { once: true });

  return {
    async ask(question, options = {}) {
      open();
      io.stderr.write(question);
      muted = options.secret === true && tty;
      const line = lines.length > 0 ? lines.shift() : closed ? undefined : await new Promise<string | undefined>((resolve) => waiters.push({ resolve }));
      // A muted terminal did not echo the Enter key; piped answers are never echoed.
      if (muted || !tty) io.stderr.write('\n');
      muted = false;
      if (interrupted || signal.aborted) throw new CliError('interrupted', { exitCode: EXIT_INTERRUPTED });
      if (line === undefined) throw new CliError(`no answer to "${question.trim()}": stdin ended`);
      return line.replace(/\r$/, '');
    },
    close() {
      signal.removeEventListener('abort', onAbort);
      rl?.close();
    },
  };
}
