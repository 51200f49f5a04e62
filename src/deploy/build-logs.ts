// Build logs: the port (`BuildLogs`), the capped head-and-tail writer every store shares, and the store on disk (one file per build).
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { PRIVATE_DIR_MODE, PRIVATE_FILE_MODE } from '../secrets/private-data-dir.js';

/** Room kept in the cap for the marker line. */
const MARKER_RESERVE = 128;
/** How long a read of an ended build waits for its log to be closed (its last lines written) on this instance. */
const CLOSE_GRACE_MS = 10_000;
/** Smallest cap that leaves a useful head and tail. */
export const MIN_BUILD_LOG_BYTES = 1024;

/** The line written where a capped log was cut. */
export const omittedMarker = (bytes: number): string => `… ${bytes} bytes of build output omitted …\n`;

/**
 * Where build output goes and how it is read back, on whichever instance asks (decisions §15): on
 * disk for one instance (`BuildLogStore`), in the database for several (`src/db/build-log-chunks.ts`).
 * What is appended is already redacted (the lifecycle redacts before it appends).
 */
export interface BuildLogs {
  /** Appends text to a build's log (opening it on first use). */
  append(deploymentId: string, buildId: string, text: string): void;
  /** Writes the held tail and flushes a build's log once the build has ended (its followers then finish). */
  close(buildId: string): Promise<void>;
  /**
   * Yields the log from the start; with `isFinished`, keeps yielding what is appended until the
   * build has finished and its log is closed (or `signal` aborts).
   */
  read(deploymentId: string, buildId: string, options?: BuildLogReadOptions): AsyncGenerator<Buffer>;
  /** Removes every log of a deployment (deleted). */
  removeDeployment(deploymentId: string): Promise<void>;
}

export interface BuildLogReadOptions {
  readonly isFinished?: () => Promise<boolean>;
  readonly signal?: AbortSignal;
  readonly pollMs?: number;
}

/** Where a capped log's bytes go, in order. */
export interface LogSink {
  write(data: Buffer): void;
  end(): Promise<void>;
}

/**
 * One open log. The first half of the cap (the head) goes to the sink as it comes, so followers see
 * it live; what comes after is held in memory, keeping only its last bytes (the tail), and written
 * with a marker line when the build ends. A log therefore never exceeds the cap.
 */
export class CappedLog {
  readonly #stream: LogSink;
  readonly #headBytes: number;
  readonly #tailBytes: number;
  #written = 0;
  #endsLine = false;
  #cut = false;
  #tail: Buffer[] = [];
  #tailFirst = 0;
  #tailLength = 0;
  #dropped = 0;

  constructor(sink: LogSink, maxBytes: number) {
    this.#stream = sink;
    const room = Math.max(0, maxBytes - MARKER_RESERVE);
    this.#headBytes = Math.floor(room / 2);
    this.#tailBytes = room - this.#headBytes;
  }

  append(text: string): void {
    let data = Buffer.from(text);
    if (!this.#cut) {
      const room = this.#headBytes - this.#written;
      if (data.length <= room) {
        this.#write(data);
        return;
      }
      // The head ends at a line end: the last one within the room left, else where the previous chunk
      // ended (when it ended one); only a head that is one long line is cut inside it.
      const newline = room > 0 ? data.lastIndexOf(0x0a, room - 1) : -1;
      const take = newline >= 0 ? newline + 1 : this.#endsLine ? 0 : room;
      this.#write(data.subarray(0, take));
      this.#cut = true;
      data = data.subarray(take);
    }
    this.#tail.push(data);
    this.#tailLength += data.length;
    // A queue read from #tailFirst, compacted now and then: output often comes a line at a time.
    while (this.#tailLength > this.#tailBytes) {
      const first = this.#tail[this.#tailFirst] as Buffer;
      const excess = this.#tailLength - this.#tailBytes;
      if (first.length <= excess) {
        this.#tailFirst += 1;
        this.#tailLength -= first.length;
        this.#dropped += first.length;
      } else {
        this.#tail[this.#tailFirst] = first.subarray(excess);
        this.#tailLength -= excess;
        this.#dropped += excess;
      }
    }
    if (this.#tailFirst > 1024 && this.#tailFirst * 2 > this.#tail.length) {
      this.#tail = this.#tail.slice(this.#tailFirst);
      this.#tailFirst = 0;
    }
  }

  /** Writes the held tail (after the marker, if anything was dropped) and closes the file. */
  async close(): Promise<void> {
    let tail = Buffer.concat(this.#tail.slice(this.#tailFirst));
    this.#tail = [];
    this.#tailFirst = 0;
    if (this.#dropped > 0) {
      // The tail starts at a line start when it holds a line end.
      const newline = tail.indexOf(0x0a);
      if (newline >= 0 && newline < tail.length - 1) {
        this.#dropped += newline + 1;
        tail = tail.subarray(newline + 1);
      }
      this.#stream.write(Buffer.from(this.#endsLine ? omittedMarker(this.#dropped) : `\n${omittedMarker(this.#dropped)}`));
    }
    if (tail.length > 0) this.#stream.write(tail);
    await this.#stream.end();
  }

  #write(data: Buffer): void {
    if (data.length === 0) return;
    this.#written += data.length;
    this.#endsLine = data[data.length - 1] === 0x0a;
    this.#stream.write(data);
  }
}

/**
 * Stores and serves build logs under `<dataDir>/logs/<deployment>/<build>.log`, each capped at
 * `maxBytes` (SLIPWAY_BUILD_LOG_MAX_BYTES): a log that would be longer keeps its head and its tail
 * with a marker line between them saying how many bytes were cut.
 */
export class BuildLogStore implements BuildLogs {
  readonly #root: string;
  readonly #maxBytes: number;
  readonly #open = new Map<string, CappedLog>();

  constructor(dataDir: string, maxBytes = 5 * 1024 * 1024) {
    this.#root = path.join(dataDir, 'logs');
    this.#maxBytes = Math.max(MIN_BUILD_LOG_BYTES, maxBytes);
  }

  file(deploymentId: string, buildId: string): string {
    return path.join(this.#root, deploymentId, `${buildId}.log`);
  }

  /** Appends text to a build's log (opening it on first use). */
  append(deploymentId: string, buildId: string, text: string): void {
    let log = this.#open.get(buildId);
    if (log === undefined) {
      fs.mkdirSync(path.join(this.#root, deploymentId), { recursive: true, mode: PRIVATE_DIR_MODE });
      log = new CappedLog(fileSink(this.file(deploymentId, buildId)), this.#maxBytes);
      this.#open.set(buildId, log);
    }
    log.append(text);
  }

  /** Writes the held tail, flushes and closes a build's log once the build has ended. */
  async close(buildId: string): Promise<void> {
    const log = this.#open.get(buildId);
    if (log === undefined) return;
    await log.close();
    this.#open.delete(buildId);
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
   * build has finished, its log is closed (the held tail written) and everything written has been
   * read (or `signal` aborts). A follower of a capped log sees the head live, then nothing until the
   * build ends, then the marker and the tail.
   */
  async *read(deploymentId: string, buildId: string, options: BuildLogReadOptions = {}): AsyncGenerator<Buffer> {
    const file = this.file(deploymentId, buildId);
    let offset = 0;
    let endedSince: number | undefined;
    for (;;) {
      if (options.signal?.aborted) return;
      const ended = options.isFinished === undefined ? true : await options.isFinished();
      // An ended build's log is closed a moment later (its last lines written): waited for, within a grace.
      if (ended) endedSince ??= Date.now();
      const finished = ended && (!this.#open.has(buildId) || Date.now() - (endedSince ?? 0) > CLOSE_GRACE_MS);
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

/** A file appended to (created private). */
function fileSink(file: string): LogSink {
  const stream = fs.createWriteStream(file, { flags: 'a', mode: PRIVATE_FILE_MODE });
  stream.on('error', () => undefined);
  return {
    write: (data) => void stream.write(data),
    end: () => new Promise<void>((resolve) => stream.end(resolve)),
  };
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
