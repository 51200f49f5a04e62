// A transaction held open in a database's container while its dump runs: its snapshot shared with the dump, the inventory taken in it (exact counts of what the dump holds, one pass, while the dump runs).
import { PassThrough } from 'node:stream';
import { SNAPSHOT_MARK, type DatabaseCredentials, type Inventory, type SnapshotDump } from '../databases/engine-adapter.js';
import type { ContainerEngine } from '../runtime/engine.js';
import { BackupStepError, lastLine } from './backup-steps.js';

/** Time the session has to open its transaction and name its snapshot. */
const OPEN_TIMEOUT_MS = 120_000;

export interface SnapshotSession {
  /** The snapshot's name, for the dump. */
  readonly snapshot: string;
  /** Ends the transaction (once the dump ended) and resolves with the inventory taken in the snapshot. */
  finish(): Promise<Inventory>;
  /** Ends the session at once (a failed dump). */
  abort(): void;
}

/**
 * Opens the session and starts its inventory. Undefined when the session cannot name a snapshot
 * (an older client, say): the caller then counts before and after the dump as a plain dump needs.
 */
export async function openSnapshotSession(
  engine: ContainerEngine,
  containerId: string,
  spec: SnapshotDump,
  credentials: DatabaseCredentials,
  parse: (output: string) => Inventory,
  signal: AbortSignal,
): Promise<SnapshotSession | undefined> {
  if (engine.execStream === undefined) return undefined;
  const stop = new AbortController();
  const input = new PassThrough();
  const command = spec.session(credentials);
  let stderr = '';
  let named: (name: string) => void = () => undefined;
  const naming = new Promise<string>((resolve) => (named = resolve));
  const exec = await engine.execStream(containerId, command.argv, {
    env: command.env,
    stdin: input,
    signal: AbortSignal.any([signal, stop.signal]),
    onStderr: (text) => {
      stderr += text;
      const found = new RegExp(`^${SNAPSHOT_MARK} (\\S+)\\r?$`, 'm').exec(stderr);
      if (found?.[1] !== undefined) named(found[1]);
    },
  });
  // The inventory's output: small, and only complete once the session ended (a pipe's stdout is buffered).
  const output: Buffer[] = [];
  exec.stdout.on('data', (chunk: Buffer) => output.push(chunk));
  const abort = (): void => {
    stop.abort(new Error('the dump ended'));
    input.destroy();
  };
  input.write(spec.open);
  let timer: NodeJS.Timeout | undefined;
  const snapshot = await Promise.race([
    naming,
    exec.done.then(
      () => undefined,
      () => undefined,
    ),
    new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), OPEN_TIMEOUT_MS))),
  ]);
  clearTimeout(timer);
  if (snapshot === undefined) {
    abort();
    return undefined;
  }
  input.write(spec.inventory);
  return {
    snapshot,
    abort,
    async finish() {
      input.end(spec.close);
      const ended = await exec.done.catch((err: unknown) => {
        throw new BackupStepError('dump', `listing what the database holds failed: ${err instanceof Error ? err.message : String(err)}`);
      });
      if (ended.exitCode !== 0) throw new BackupStepError('dump', `listing what the database holds failed (exit ${ended.exitCode}): ${lastLine(ended.output)}`);
      return parse(Buffer.concat(output).toString('utf8'));
    },
  };
}
