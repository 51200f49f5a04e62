// A step of a backup, a verification or a restore that failed, named (decisions §20: `failed` with the step and message), and the small helpers the steps share.
import crypto from 'node:crypto';
import { Transform, type Readable, type TransformCallback } from 'node:stream';
import type { ContainerCommand, Inventory } from '../databases/engine-adapter.js';
import type { ContainerEngine } from '../runtime/engine.js';

export class BackupStepError extends Error {
  override readonly name = 'BackupStepError';
  constructor(
    readonly step: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** A pass-through that counts and hashes (SHA-256) what flows through it, with backpressure intact. */
export class HashingCounter extends Transform {
  readonly #hash = crypto.createHash('sha256');
  bytes = 0;
  #digest: string | undefined;

  override _transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback): void {
    this.#hash.update(chunk);
    this.bytes += chunk.length;
    done(null, chunk);
  }

  /** The hex digest, once the stream ended. */
  digest(): string {
    this.#digest ??= this.#hash.digest('hex');
    return this.#digest;
  }
}

/** Pipes `from` into `to`, destroying `to` with `from`'s error (pipe() alone would leave it hanging). */
export function chain<T extends NodeJS.WritableStream & Readable>(from: Readable, to: T): T {
  from.on('error', (err) => to.destroy(err));
  return from.pipe(to);
}

/** The last non-empty line of a command's output, short. */
export const lastLine = (output: string): string =>
  output
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '')
    .pop()
    ?.slice(0, 300) ?? '';

/** Runs an adapter's inventory command in a container and reads it; a failure is the step `step`. */
export async function takeInventory(engine: ContainerEngine, containerId: string, command: ContainerCommand, parse: (output: string) => Inventory, step: string): Promise<Inventory> {
  const result = await engine.execInContainer!(containerId, command.argv, { env: command.env, timeoutMs: 120_000 });
  if (result.exitCode !== 0) throw new BackupStepError(step, `listing what the database holds failed (exit ${result.exitCode}): ${lastLine(result.output)}`);
  return parse(result.output);
}

/**
 * Whether a restored copy matches the source: the same tables (or keys), each count equal to the
 * source's before or after its dump, or between (writes while it ran). Undefined when it matches,
 * else what differs.
 */
export function inventoryMismatch(source: readonly Inventory[], restored: Inventory): string | undefined {
  const [before, after] = [source[0], source[source.length - 1]];
  if (before === undefined || after === undefined) return undefined;
  if ('keys' in restored) {
    const low = Math.min('keys' in before ? before.keys : 0, 'keys' in after ? after.keys : 0);
    const high = Math.max('keys' in before ? before.keys : 0, 'keys' in after ? after.keys : 0);
    return restored.keys >= low && restored.keys <= high ? undefined : `the restored copy holds ${restored.keys} keys, the source held ${low === high ? low : `${low} to ${high}`}`;
  }
  const b = 'tables' in before ? before.tables : {};
  const a = 'tables' in after ? after.tables : {};
  const names = new Set([...Object.keys(restored.tables)]);
  const sameSet = (t: Readonly<Record<string, number>>): boolean => Object.keys(t).length === names.size && Object.keys(t).every((n) => names.has(n));
  if (!sameSet(b) && !sameSet(a)) {
    const missing = Object.keys(b).filter((n) => !names.has(n));
    const extra = [...names].filter((n) => !(n in b));
    return `the restored copy's tables differ from the source's (${[missing.length > 0 ? `missing ${missing.join(', ')}` : '', extra.length > 0 ? `extra ${extra.join(', ')}` : ''].filter(Boolean).join('; ')})`;
  }
  for (const [name, rows] of Object.entries(restored.tables)) {
    const x = b[name] ?? a[name] ?? rows;
    const y = a[name] ?? b[name] ?? rows;
    if (rows < Math.min(x, y) || rows > Math.max(x, y)) return `table ${name} holds ${rows} rows in the restored copy, ${x === y ? x : `${Math.min(x, y)} to ${Math.max(x, y)}`} in the source`;
  }
  return undefined;
}
