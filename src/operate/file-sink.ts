// A Writable into a file that gathers chunks and writes them with one writev on the calling thread, then syncs the file at its end.
import fs from 'node:fs';
import { Writable } from 'node:stream';

/** Bytes gathered before one writev (the chunks stay referenced until then; no copy is made). */
const GATHER_BYTES = 1024 * 1024;
/** Written bytes after which an fdatasync is started in the thread pool while writing goes on. */
const SYNC_EVERY_BYTES = 8 * 1024 * 1024;
/** writev's limit on buffers per call (IOV_MAX on Linux). */
const MAX_BUFFERS = 1024;

/**
 * Writes a backup into an open file descriptor. The backup is many small buffers (sealed pieces of
 * its frames); fs.WriteStream hands each write to the thread pool and back, and on a saturated host
 * every hand-off waits for a CPU: here they are gathered and written with writevSync, from the page
 * cache's point of view the same memcpy without the hand-offs. Every 8 MiB an fdatasync starts in
 * the thread pool (the disk writes what is there while the rest is sealed), so the final fsync (a
 * backup is renamed into place only once it is on disk) has little left to wait for; then, if
 * `closeFd`, the file is closed. A write or sync error fails the stream.
 */
export function fileSink(fd: number, options: { closeFd: boolean } = { closeFd: true }): Writable {
  let gathered: Buffer[] = [];
  let bytes = 0;
  let open = true;
  let unsynced = 0;
  /** The fdatasync under way, if any (the descriptor is not closed under it). */
  let syncing: Promise<void> | undefined;
  let syncError: Error | undefined;
  const syncSoon = (): void => {
    if (syncing !== undefined || unsynced < SYNC_EVERY_BYTES) return;
    unsynced = 0;
    syncing = new Promise((resolve) => {
      fs.fdatasync(fd, (err) => {
        if (err) syncError = err;
        syncing = undefined;
        resolve();
      });
    });
  };
  const close = (): void => {
    if (!options.closeFd || !open) return;
    open = false;
    fs.closeSync(fd);
  };
  const flush = (): void => {
    let pending = gathered;
    gathered = [];
    bytes = 0;
    while (pending.length > 0) {
      const batch = pending.slice(0, MAX_BUFFERS);
      let written = fs.writevSync(fd, batch);
      let done = 0;
      // A short write (rare on files): continue from where it stopped.
      while (done < batch.length && written >= batch[done]!.length) written -= batch[done++]!.length;
      pending = done < batch.length ? [batch[done]!.subarray(written), ...batch.slice(done + 1), ...pending.slice(MAX_BUFFERS)] : pending.slice(MAX_BUFFERS);
    }
    if (syncError !== undefined) throw syncError;
  };
  const finish = (callback: (err?: Error | null) => void): void => {
    try {
      flush();
    } catch (err) {
      callback(err as Error);
      return;
    }
    // The sync in the thread pool: it may take a while, and a server's backup must not hold its event loop.
    void (syncing ?? Promise.resolve()).then(() => fs.fsync(fd, (err) => {
      try {
        close();
      } catch (closeErr) {
        callback(err ?? (closeErr as Error));
        return;
      }
      callback(err ?? syncError);
    }));
  };
  return new Writable({
    highWaterMark: GATHER_BYTES,
    write(chunk: Buffer, _encoding, callback) {
      gathered.push(chunk);
      bytes += chunk.length;
      unsynced += chunk.length;
      if (bytes < GATHER_BYTES) return callback();
      try {
        flush();
        syncSoon();
        callback();
      } catch (err) {
        callback(err as Error);
      }
    },
    final(callback) {
      finish(callback);
    },
    destroy(err, callback) {
      // Failed or abandoned: what was gathered is dropped; the descriptor is closed all the same.
      gathered = [];
      void (syncing ?? Promise.resolve()).then(() => {
        try {
          close();
        } catch {
          // Closing a descriptor that failed to write: nothing more to do.
        }
        callback(err);
      });
    },
  });
}
