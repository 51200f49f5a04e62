// Build output on disk, one file per build: appended while building, read or followed by clients.
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

/** Stores and serves build logs under `<dataDir>/logs/<deployment>/<build>.log`. */
export class BuildLogStore {
  readonly #root: string;
  readonly #streams = new Map<string, fs.WriteStream>();

  constructor(dataDir: string) {
    this.#root = path.join(dataDir, 'logs');
  }

  file(deploymentId: string, buildId: string): string {
    return path.join(this.#root, deploymentId, `${buildId}.log`);
  }

  /** Appends text to a build's log (opening it on first use). */
  append(deploymentId: string, buildId: string, text: string): void {
    let stream = this.#streams.get(buildId);
    if (stream === undefined) {
      fs.mkdirSync(path.join(this.#root, deploymentId), { recursive: true });
      stream = fs.createWriteStream(this.file(deploymentId, buildId), { flags: 'a' });
      stream.on('error', () => undefined);
      this.#streams.set(buildId, stream);
    }
    stream.write(text);
  }

  /** Flushes and closes a build's log once the build has ended. */
  async close(buildId: string): Promise<void> {
    const stream = this.#streams.get(buildId);
    if (stream === undefined) return;
    this.#streams.delete(buildId);
    await new Promise<void>((resolve) => stream.end(resolve));
  }

  /** The last `maxBytes` of a build's log (for error messages). */
  async tail(deploymentId: string, buildId: string, maxBytes: number): Promise<string> {
    try {
      const handle = await fsp.open(this.file(deploymentId, buildId), 'r');
      try {
        const { size } = await handle.stat();
        const length = Math.min(size, maxBytes);
        const buffer = Buffer.alloc(length);
        await handle.read(buffer, 0, length, size - length);
        return buffer.toString('utf8');
      } finally {
        await handle.close();
      }
    } catch {
      return '';
    }
  }

  /**
   * Yields the log from the start; with `isFinished`, keeps yielding what is appended until the
   * build has finished and everything written has been read (or `signal` aborts).
   */
  async *read(
    deploymentId: string,
    buildId: string,
    options: { isFinished?: () => Promise<boolean>; signal?: AbortSignal; pollMs?: number } = {},
  ): AsyncGenerator<Buffer> {
    const file = this.file(deploymentId, buildId);
    let offset = 0;
    for (;;) {
      if (options.signal?.aborted) return;
      const finished = options.isFinished === undefined ? true : await options.isFinished();
      const chunk = await readFrom(file, offset);
      if (chunk.length > 0) {
        offset += chunk.length;
        yield chunk;
        continue;
      }
      if (finished) return;
      await sleep(options.pollMs ?? 200, undefined, { signal: options.signal }).catch(() => undefined);
    }
  }

  async removeDeployment(deploymentId: string): Promise<void> {
    await fsp.rm(path.join(this.#root, deploymentId), { recursive: true, force: true });
  }
}

async function readFrom(file: string, offset: number): Promise<Buffer> {
  let handle: fsp.FileHandle;
  try {
    handle = await fsp.open(file, 'r');
  } catch {
    return Buffer.alloc(0);
  }
  try {
    const buffer = Buffer.alloc(64 * 1024);
    const { bytesRead } = await handle.read(buffer, 0, buffer.length, offset);
    return buffer.subarray(0, bytesRead);
  } finally {
    await handle.close();
  }
}
