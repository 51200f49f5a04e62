// A Writable into a file that gathers chunks and writes them with one writev on the calling thread, then syncs the file at its end.
import fs from 'node:fs';
import { Writable } from 'node:stream';

/** Bytes gathered before one writev (the chunks stay referenced until then; no copy is made). */
const GATHER_BYTES = 1024 * 1024;
/** writev's limit on buffers per call (IOV_MAX on Linux). */
const MAX_BUFFERS = 1024;

/**
 * Writes a backup into an open file descriptor. The backup is many small buffers (sealed pieces of
 * its frames); fs.WriteStream hands each write to the thread pool and back, and on a saturated host
 * every hand-off waits for a CPU: here they are gathered and written with writevSync, from the page
 * cache's point of view the same memcpy without the hand-offs. At the end the file is synced (a
 * backup is renamed into place only once it is on disk) and, if `closeFd`, closed. A write error
 * fails the stream.
 */
export function fileSink(fd: number, options: { closeFd: boolean } = { closeFd: true }): Writable {
  let gathered: Buffer[] = [];
  let bytes = 0;
  let open = true;
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
  };
  const finish = (callback: (err?: Error | null) => void): void => {
    try {
      flush();
    } catch (err) {
      callback(err as Error);
      return;
    }
    // The sync in the thread pool: it may take a while, and a server's backup must not hold its event loop.
    fs.fsync(fd, (err) => {
      try {
        close();
      } catch (closeErr) {
        callback(err ?? (closeErr as Error));
        return;
      }
      callback(err);
    });
  };
  return new Writable({
    highWaterMark: GATHER_BYTES,
    write(chunk: Buffer, _encoding, callback) {
      gathered.push(chunk);
      bytes += chunk.length;
      if (bytes < GATHER_BYTES) return callback();
      try {
        flush();
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
      try {
        close();
      } catch {
        // Closing a descriptor that failed to write: nothing more to do.
      }
      callback(err);
    },
  });
}
