// A consistent snapshot of a WAL-mode SQLite database read straight from its file, in small pieces, while one read transaction pins it.
import fs from 'node:fs';
import type SQLite from 'better-sqlite3';

/** The pieces the file is read in: small buffers are recycled memory, where one buffer of the whole database is fresh pages (slow on a VM). */
const PIECE_BYTES = 64 * 1024;

/** A pinned snapshot: its size, the pieces of its pages in order, and the end of the read transaction that pins it. */
export interface FileSnapshot {
  readonly size: number;
  pieces(): Generator<Buffer>;
  release(): void;
}

/**
 * Pins the database file as one consistent snapshot, or answers undefined (the caller copies
 * through SQLite then). In WAL mode the database file alone holds a snapshot once every WAL frame
 * of it is checkpointed into the file, and stays as it is while a read transaction of that snapshot
 * is open: a checkpoint never copies frames newer than an open reader's into the file, and writers
 * only append to the WAL. So: a passive checkpoint that copied every frame (none left behind, none
 * busy), then a read transaction begun with `data_version` unchanged since before the checkpoint
 * (no other connection committed in between, so the snapshot's frames are all in the file). The
 * pages are then read from the file without SQLite's page cache or a copy of the whole database
 * in memory; `run` reads what must be read in the same transaction (the schema version).
 * Not in WAL mode, or when a writer raced the checkpoint, it answers undefined.
 */
export function pinFileSnapshot<T>(live: SQLite.Database, file: string, run: () => T): { snapshot: FileSnapshot; value: T } | undefined {
  if (String(live.pragma('journal_mode', { simple: true })).toLowerCase() !== 'wal') return undefined;
  const before = live.pragma('data_version', { simple: true });
  const [checkpoint] = live.pragma('wal_checkpoint(PASSIVE)') as { busy: number; log: number; checkpointed: number }[];
  if (checkpoint === undefined || checkpoint.busy !== 0 || checkpoint.log !== checkpoint.checkpointed) return undefined;
  live.exec('BEGIN DEFERRED');
  let pinned = false;
  try {
    // The first read begins the snapshot; data_version is read in it.
    if (live.pragma('data_version', { simple: true }) !== before) return undefined;
    const pageSize = Number(live.pragma('page_size', { simple: true }));
    const pageCount = Number(live.pragma('page_count', { simple: true }));
    const value = run();
    const size = pageSize * pageCount;
    pinned = true;
    let released = false;
    return {
      value,
      snapshot: {
        size,
        *pieces() {
          // Read on the calling thread: from the page cache a piece takes microseconds, less than a
          // hand-off to the thread pool and back, which on a saturated host waits for a CPU each way.
          const fd = fs.openSync(file, 'r');
          try {
            for (let at = 0; at < size; ) {
              const piece = Buffer.allocUnsafe(Math.min(PIECE_BYTES, size - at));
              const read = fs.readSync(fd, piece, 0, piece.length, at);
              if (read !== piece.length) throw new Error(`${file} ended at ${at + read} bytes, before its ${size} bytes of pages`);
              at += read;
              yield piece;
            }
          } finally {
            fs.closeSync(fd);
          }
        },
        release() {
          if (released) return;
          released = true;
          live.exec('ROLLBACK');
        },
      },
    };
  } finally {
    if (!pinned) live.exec('ROLLBACK');
  }
}
