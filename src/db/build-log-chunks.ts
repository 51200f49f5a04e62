// Build logs in the database (several instances, decisions §15): the building instance appends batched chunks, any instance reads and follows them.
import { setTimeout as sleep } from 'node:timers/promises';
import { CappedLog, MIN_BUILD_LOG_BYTES, type BuildLogReadOptions, type BuildLogs, type LogSink } from '../deploy/build-logs.js';
import type { Coordination } from '../deploy/coordination.js';
import type { Db } from './database.js';

export interface DatabaseBuildLogOptions {
  /** The per-build cap (SLIPWAY_BUILD_LOG_MAX_BYTES), as on disk. */
  readonly maxBytes: number;
  /** The feed that tells followers on every instance a chunk was added (ids only). */
  readonly coordination: Pick<Coordination, 'announce' | 'onAnnounce'>;
  /** This instance's id (the announcement's origin). */
  readonly self: string;
  /** Logs written before they were kept in the database (this instance's disk), read when the database has none. */
  readonly fallback?: BuildLogs;
  /** A chunk is written at most this long after its first byte came (default 250 ms)… */
  readonly flushMs?: number;
  /** …or as soon as this many bytes are waiting (default 64 KiB). */
  readonly flushBytes?: number;
  /** A follower reads again this often when no announcement comes (default 1 s). */
  readonly pollMs?: number;
  /** A follower of a build that ended waits this long for the log's last chunk (its writer died; default 10 s). */
  readonly finalGraceMs?: number;
  readonly log: (level: 'info' | 'warn' | 'error', msg: string, detail?: object) => void;
}

/** Chunks read per query. */
const READ_ROWS = 32;
/** Tries of one chunk's insert before it is given up (the database unreachable meanwhile). */
const INSERT_TRIES = 5;

/** What a follower waits on: an announcement of its build, the poll interval, or its signal. */
class Wakeup {
  #wake: (() => void) | undefined;
  #pending = false;

  fire(): void {
    this.#pending = true;
    this.#wake?.();
  }

  async wait(ms: number, signal?: AbortSignal): Promise<void> {
    if (this.#pending) {
      this.#pending = false;
      return;
    }
    const woken = new Promise<void>((resolve) => (this.#wake = resolve));
    const timer = new AbortController();
    const signals = signal === undefined ? [timer.signal] : [timer.signal, signal];
    await Promise.race([woken, sleep(ms, undefined, { signal: AbortSignal.any(signals) }).catch(() => undefined)]);
    timer.abort();
    this.#wake = undefined;
    this.#pending = false;
  }
}

/** Batches one build's output into chunk rows, written in order (a failed insert is tried again before the next). */
class ChunkSink implements LogSink {
  #pending: Buffer[] = [];
  #pendingBytes = 0;
  #timer: NodeJS.Timeout | undefined;
  #chain: Promise<void> = Promise.resolve();

  constructor(
    private readonly insert: (data: Buffer, final: boolean) => Promise<void>,
    private readonly flushMs: number,
    private readonly flushBytes: number,
  ) {}

  write(data: Buffer): void {
    if (data.length === 0) return;
    this.#pending.push(data);
    this.#pendingBytes += data.length;
    if (this.#pendingBytes >= this.flushBytes) void this.#flush(false);
    else this.#timer ??= setTimeout(() => void this.#flush(false), this.flushMs);
  }

  end(): Promise<void> {
    return this.#flush(true);
  }

  #flush(final: boolean): Promise<void> {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    const data = Buffer.concat(this.#pending);
    this.#pending = [];
    this.#pendingBytes = 0;
    if (data.length > 0 || final) this.#chain = this.#chain.then(() => this.insert(data, final));
    return this.#chain;
  }
}

/**
 * Build logs every instance sharing `db` reads. Written as on disk (the same cap, head live and the
 * tail at the end), in chunks of at most `flushMs`/`flushBytes`; each chunk is announced on the
 * coordination feed (`<instance> l:<build id>`), which wakes followers on every instance, with a
 * poll in case an announcement is lost.
 */
export function databaseBuildLogs(db: Db, options: DatabaseBuildLogOptions): BuildLogs {
  const maxBytes = Math.max(MIN_BUILD_LOG_BYTES, options.maxBytes);
  const flushMs = options.flushMs ?? 250;
  const flushBytes = options.flushBytes ?? 64 * 1024;
  const pollMs = options.pollMs ?? 1000;
  const finalGraceMs = options.finalGraceMs ?? 10_000;
  const open = new Map<string, CappedLog>();

  const insert = async (deploymentId: string, buildId: string, data: Buffer, final: boolean): Promise<void> => {
    for (let attempt = 1; ; attempt++) {
      try {
        await db.insertInto('build_log_chunks').values({ build_id: buildId, deployment_id: deploymentId, data, final: final ? 1 : 0 }).execute();
        break;
      } catch (err) {
        if (attempt >= INSERT_TRIES) {
          options.log('warn', `${data.length} bytes of the log of build ${buildId.slice(0, 8)} could not be stored`, { err });
          return;
        }
        await sleep(500 * attempt);
      }
    }
    options.coordination.announce(`${options.self} l:${buildId}`);
  };

  return {
    append(deploymentId, buildId, text) {
      let log = open.get(buildId);
      if (log === undefined) {
        log = new CappedLog(new ChunkSink((data, final) => insert(deploymentId, buildId, data, final), flushMs, flushBytes), maxBytes);
        open.set(buildId, log);
      }
      log.append(text);
    },

    async close(buildId) {
      const log = open.get(buildId);
      if (log === undefined) return;
      open.delete(buildId);
      await log.close();
    },

    async *read(deploymentId: string, buildId: string, readOptions: BuildLogReadOptions = {}): AsyncGenerator<Buffer> {
      const { isFinished, signal } = readOptions;
      const wakeup = new Wakeup();
      const suffix = ` l:${buildId}`;
      const unsubscribe = options.coordination.onAnnounce((message) => {
        if (message === null || message.endsWith(suffix)) wakeup.fire();
      });
      try {
        let last = 0;
        let any = false;
        /** Whether the newest chunk read closed the log (a takeover may append after an earlier close). */
        let closed = false;
        let finishedSince: number | undefined;
        for (;;) {
          if (signal?.aborted === true) return;
          // Asked before reading: a build that had ended then has its last chunk written by now, or soon.
          const finished = isFinished === undefined ? true : await isFinished();
          const rows = await db
            .selectFrom('build_log_chunks')
            .select(['id', 'data', 'final'])
            .where('build_id', '=', buildId)
            .where('id', '>', last)
            .orderBy('id')
            .limit(READ_ROWS)
            .execute();
          if (rows.length > 0) {
            any = true;
            for (const row of rows) {
              last = row.id;
              closed = row.final === 1;
              if (row.data.length > 0) yield Buffer.from(row.data);
            }
            continue;
          }
          if (!any && finished && options.fallback !== undefined) {
            // A log from before logs were kept in the database: on this instance's disk, if anywhere.
            yield* options.fallback.read(deploymentId, buildId, signal === undefined ? {} : { signal });
            return;
          }
          if (isFinished === undefined || (finished && closed)) return;
          if (finished) {
            finishedSince ??= Date.now();
            if (Date.now() - finishedSince > finalGraceMs) return;
          }
          await wakeup.wait(finished ? Math.min(pollMs, 250) : pollMs, signal);
        }
      } finally {
        unsubscribe();
      }
    },

    async removeDeployment(deploymentId) {
      await db.deleteFrom('build_log_chunks').where('deployment_id', '=', deploymentId).execute();
      await options.fallback?.removeDeployment(deploymentId);
    },
  };
}
