// Extraction of uploaded source archives (.tar.gz): every entry checked, anything suspicious rejected, nothing written outside.
import { constants as fsConstants, createReadStream } from 'node:fs';
import * as fs from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGunzip } from 'node:zlib';
import * as tar from 'tar';
import { DomainError } from '../core/errors.js';
import { MAX_PATH_BYTES, childOf, invalid, isAbsoluteLike, quote, splitSafePath, symlinkEscape, type TreeNode } from './archive-paths.js';

export interface ArchiveLimits {
  /** Largest total size of the files in the archive, in bytes. */
  readonly maxExpandedBytes: number;
  /** Most entries the archive may hold (directories its paths imply are bounded by the same number). */
  readonly maxEntries: number;
}

/** Largest pax / GNU long-name header; larger ones are refused, never skipped. */
const MAX_META_BYTES = 1024 * 1024;
/** Tar framing allowed per entry on top of file data (headers, padding, long names), to bound decompression work. */
const FRAMING_BYTES_PER_ENTRY = 16 * 1024;
/** A gzip member starts with ID1 ID2 and CM=8 (deflate). */
const GZIP_MAGIC = Buffer.from([0x1f, 0x8b, 0x08]);
/** fs errors that mean the archive's entries collide with each other, not that the server is broken. */
const CONFLICT_CODES = new Set(['EEXIST', 'ENOTDIR', 'EISDIR', 'ENAMETOOLONG', 'ELOOP', 'ENOENT', 'EINVAL']);

/**
 * One pass over the archive: the parser feeds entries in order; checks are synchronous, disk work is
 * chained. A dry pass (`write` false) runs every check from the headers alone and writes nothing.
 */
class ArchiveExtraction {
  readonly #root: string;
  readonly #limits: ArchiveLimits;
  readonly #write: boolean;
  readonly #maxTarBytes: number;
  readonly #tree: TreeNode & { kind: 'dir' } = { kind: 'dir', children: new Map(), mode: undefined };
  readonly #symlinks: Array<{ readonly raw: string; readonly segments: readonly string[]; readonly target: string }> = [];
  readonly #dirModes: Array<{ readonly abs: string; readonly node: TreeNode & { kind: 'dir' } }> = [];
  readonly #stop = new AbortController();
  #error: unknown = undefined;
  #failed = false;
  #entries = 0;
  #impliedDirs = 0;
  #declaredBytes = 0;
  #writtenBytes = 0;
  #tarBytes = 0;
  #sniffed = Buffer.alloc(0);
  #sawEof = false;
  #chain: Promise<void> = Promise.resolve();
  #current: tar.ReadEntry | undefined;
  #drained = false;
  #pendingWrite: ((error?: Error | null) => void) | undefined;
  #pendingFinal: ((error?: Error | null) => void) | undefined;

  constructor(root: string, limits: ArchiveLimits, write: boolean) {
    this.#root = root;
    this.#limits = limits;
    this.#write = write;
    this.#maxTarBytes = Math.min(
      Number.MAX_SAFE_INTEGER,
      limits.maxExpandedBytes + (limits.maxEntries + 1) * FRAMING_BYTES_PER_ENTRY + MAX_META_BYTES,
    );
  }

  async run(archivePath: string, signal: AbortSignal | undefined): Promise<{ entries: number; expandedBytes: number }> {
    const onAbort = (): void => this.#fail(signal?.reason ?? new Error('aborted'));
    if (signal?.aborted) onAbort();
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      const parser = this.#makeParser();
      const feeder = new Writable({
        write: (chunk: Buffer, _encoding, callback) => this.#feed(parser, chunk, callback),
        final: (callback) => this.#end(parser, callback),
      });
      try {
        await pipeline(createReadStream(archivePath), createGunzip(), feeder, { signal: this.#stop.signal });
      } catch (err) {
        // zlib's Z_* errors mean a corrupt or truncated upload; anything else (a read error) is not the caller's fault.
        const code = (err as NodeJS.ErrnoException | undefined)?.code;
        const corrupt = typeof code === 'string' && code.startsWith('Z_');
        this.#fail(corrupt ? invalid(`archive is not a valid gzip stream: ${(err as Error).message}`) : err);
      }
      await this.#chain;
      if (this.#failed) throw this.#error;
      if (this.#entries === 0) {
        // node-tar warns "Unrecognized archive format" both for an archive of zero blocks only and for
        // fewer than 512 bytes of anything; the end-of-archive marker tells them apart.
        throw invalid(this.#sawEof ? 'archive is empty' : 'archive is not a tar archive');
      }
      await this.#createSymlinks(signal);
      if (!this.#write) return { entries: this.#entries, expandedBytes: this.#declaredBytes };
      await this.#applyDirModes(signal);
      return { entries: this.#entries, expandedBytes: this.#writtenBytes };
    } finally {
      signal?.removeEventListener('abort', onAbort);
    }
  }

  #makeParser(): tar.Parser {
    // brotli/zstd off: the gunzipped stream must be a plain tar, never sniffed for another codec.
    const parser = new tar.Parser({ strict: false, brotli: false, zstd: false, maxMetaEntrySize: MAX_META_BYTES });
    parser.on('entry', (entry: tar.ReadEntry) => this.#onEntry(entry));
    parser.on('ignoredEntry', (entry: tar.ReadEntry) => {
      entry.on('error', () => undefined);
      this.#fail(
        entry.meta
          ? invalid(`archive has an extended header larger than ${MAX_META_BYTES} bytes (before ${quote(entry.path)})`)
          : invalid(`archive entry ${quote(entry.path)} has an unsupported type (${entry.type})`),
      );
    });
    parser.on('warn', (code: string, message: string) => {
      // Decided in run() from the entry count and the end-of-archive marker, for a clearer message.
      if (code === 'TAR_BAD_ARCHIVE' && message === 'Unrecognized archive format') return;
      this.#fail(invalid(`archive is not a valid tar archive: ${message}`));
    });
    parser.on('error', (err: Error) => this.#fail(invalid(`archive is not a valid tar archive: ${err.message}`)));
    parser.on('eof', () => {
      this.#sawEof = true;
      this.#release();
    });
    parser.on('drain', () => this.#release());
    parser.on('end', () => {
      const final = this.#pendingFinal;
      this.#pendingFinal = undefined;
      final?.(this.#failed ? (this.#error as Error) : null);
    });
    return parser;
  }

  #feed(parser: tar.Parser, chunk: Buffer, callback: (error?: Error | null) => void): void {
    if (this.#failed) return callback(this.#error as Error);
    this.#tarBytes += chunk.length;
    if (this.#tarBytes > this.#maxTarBytes) {
      this.#fail(invalid(`archive expands to more than ${this.#maxTarBytes} bytes of tar data`));
      return callback(this.#error as Error);
    }
    // Anything after the end-of-archive marker (normally zero padding to the record size) is not parsed:
    // node-tar would buffer it all in memory.
    if (this.#sawEof) return callback();
    if (this.#sniffed.length < 2) {
      this.#sniffed = Buffer.concat([this.#sniffed, chunk.subarray(0, 2)]);
      // The parser would silently gunzip a nested gzip stream; a .tar.gz.gz is not a .tar.gz.
      if (this.#sniffed.length >= 2 && this.#sniffed[0] === 0x1f && this.#sniffed[1] === 0x8b) {
        this.#fail(invalid('archive is not a tar archive (it holds another gzip stream)'));
        return callback(this.#error as Error);
      }
    }
    this.#drained = false;
    const ok = parser.write(chunk);
    if (ok || this.#drained || this.#sawEof || this.#failed) return callback(this.#failed ? (this.#error as Error) : null);
    this.#pendingWrite = callback;
  }

  #release(): void {
    this.#drained = true;
    const pending = this.#pendingWrite;
    this.#pendingWrite = undefined;
    pending?.(this.#failed ? (this.#error as Error) : null);
  }

  #end(parser: tar.Parser, callback: (error?: Error | null) => void): void {
    if (this.#failed) return callback(this.#error as Error);
    this.#pendingFinal = callback;
    parser.end();
  }

  /** Records the first failure and stops everything; later failures are consequences of it. */
  #fail(error: unknown): void {
    if (this.#failed) return;
    this.#failed = true;
    this.#error = error;
    this.#stop.abort();
    this.#current?.destroy();
    const pendingWrite = this.#pendingWrite;
    const pendingFinal = this.#pendingFinal;
    this.#pendingWrite = undefined;
    this.#pendingFinal = undefined;
    pendingWrite?.(error as Error);
    pendingFinal?.(error as Error);
  }

  /** Queues disk work after everything queued before it; skipped once the run has failed, and in a dry pass. */
  #enqueue(raw: string, work: () => Promise<void>): void {
    if (!this.#write) return;
    this.#chain = this.#chain
      .then(async () => {
        if (!this.#failed) await work();
      })
      .catch((err: unknown) => this.#fail(describeFsError(err, raw)));
  }

  #onEntry(entry: tar.ReadEntry): void {
    // Errors surface through the iteration in #writeFile or through the parser; never as an unhandled event.
    entry.on('error', () => undefined);
    if (this.#failed) {
      entry.resume();
      return;
    }
    try {
      this.#checkEntry(entry);
    } catch (err) {
      entry.resume();
      this.#fail(err);
    }
  }

  #checkEntry(entry: tar.ReadEntry): void {
    const raw = typeof entry.path === 'string' ? entry.path : String(entry.path);
    const name = `archive entry ${quote(raw)}`;
    this.#entries += 1;
    if (this.#entries > this.#limits.maxEntries) throw invalid(`archive has more than ${this.#limits.maxEntries} entries`);

    const kind = entryKind(entry.type);
    if (kind === undefined) throw invalid(`${name} has an unsupported type (${entry.type}); only files, directories and links are allowed`);
    const size = entry.size;
    if (!Number.isSafeInteger(size) || size < 0) throw invalid(`${name} has an invalid size`);
    if (kind !== 'file' && size > 0) throw invalid(`${name} is a ${kind} but carries ${size} bytes of data`);
    const segments = splitSafePath(raw, 'archive entry');

    if (segments.length === 0) {
      // "./" names the extraction root itself, which already exists as a directory.
      if (kind !== 'dir') throw invalid(`${name} names the archive root but is not a directory`);
      entry.resume();
      return;
    }

    if (kind === 'file') {
      this.#declaredBytes += size;
      if (this.#declaredBytes > this.#limits.maxExpandedBytes) {
        throw invalid(`archive expands to more than ${this.#limits.maxExpandedBytes} bytes (at ${name}, ${size} bytes)`);
      }
    }

    const parent = this.#ensureParents(segments, name);
    const last = segments[segments.length - 1] as string;
    const abs = path.join(this.#root, ...segments);
    const existing = parent.children.get(last);

    switch (kind) {
      case 'dir': {
        if (existing !== undefined && existing.kind !== 'dir') throw invalid(`${name} is a directory but an earlier entry put a ${existing.kind} there`);
        const node = existing ?? { kind: 'dir' as const, children: new Map<string, TreeNode>(), mode: undefined };
        if (existing === undefined) {
          parent.children.set(last, node);
          this.#enqueue(raw, () => fs.mkdir(abs));
        }
        if (node.mode === undefined) this.#dirModes.push({ abs, node });
        node.mode = entry.mode ?? 0o755;
        entry.resume();
        return;
      }
      case 'file': {
        const replace = this.#checkReplaceable(existing, name);
        parent.children.set(last, { kind: 'file' });
        if (!this.#write) {
          entry.resume();
          return;
        }
        const mode = (entry.mode ?? 0o644) & 0o777; // never setuid/setgid/sticky
        this.#current = entry;
        this.#enqueue(raw, () => this.#writeFile(entry, abs, size, mode, replace, name));
        return;
      }
      case 'hardlink': {
        const linkpath = typeof entry.linkpath === 'string' ? entry.linkpath : '';
        const target = splitSafePath(linkpath, `${name} is a hard link whose target`);
        if (!this.#isRegularFile(target)) {
          throw invalid(`${name} is a hard link to ${quote(linkpath)}, which is not an earlier regular file in the archive`);
        }
        if (target.join('/') === segments.join('/')) throw invalid(`${name} is a hard link to itself`);
        const replace = this.#checkReplaceable(existing, name);
        parent.children.set(last, { kind: 'file' });
        const targetAbs = path.join(this.#root, ...target);
        this.#enqueue(raw, async () => {
          if (replace) await fs.unlink(abs);
          await fs.link(targetAbs, abs);
        });
        entry.resume();
        return;
      }
      case 'symlink': {
        const target = typeof entry.linkpath === 'string' ? entry.linkpath : '';
        if (target === '') throw invalid(`${name} is a symlink with an empty target`);
        if (target.includes('\0')) throw invalid(`${name} is a symlink whose target contains a NUL byte`);
        if (Buffer.byteLength(target) > MAX_PATH_BYTES) throw invalid(`${name} is a symlink whose target is too long`);
        if (isAbsoluteLike(target)) throw invalid(`${name} is a symlink to an absolute path (${quote(target)})`);
        if (existing !== undefined) throw invalid(`${name} is a symlink but an earlier entry put a ${existing.kind} there`);
        const why = symlinkEscape(this.#tree, segments.slice(0, -1), target, false);
        if (why !== undefined) throw invalid(`${name} is a symlink to ${quote(target)}, which ${why}`);
        parent.children.set(last, { kind: 'symlink', target });
        // Created only after every other entry, so nothing is ever written through an archive's symlink.
        this.#symlinks.push({ raw, segments, target });
        entry.resume();
        return;
      }
    }
  }

  /** Walks to the parent directory of `segments`, recording (and queueing mkdir for) directories the path implies. */
  #ensureParents(segments: readonly string[], name: string): TreeNode & { kind: 'dir' } {
    let dir = this.#tree;
    for (let i = 0; i < segments.length - 1; i++) {
      const segment = segments[i] as string;
      const child = dir.children.get(segment);
      if (child === undefined) {
        this.#impliedDirs += 1;
        if (this.#impliedDirs > this.#limits.maxEntries) {
          throw invalid(`archive paths imply more than ${this.#limits.maxEntries} directories`);
        }
        const created = { kind: 'dir' as const, children: new Map<string, TreeNode>(), mode: undefined };
        dir.children.set(segment, created);
        const abs = path.join(this.#root, ...segments.slice(0, i + 1));
        this.#enqueue(segments.slice(0, i + 1).join('/'), () => fs.mkdir(abs));
        dir = created;
      } else if (child.kind === 'dir') {
        dir = child;
      } else {
        const at = quote(segments.slice(0, i + 1).join('/'));
        throw invalid(
          child.kind === 'symlink'
            ? `${name} goes through the symlink ${at}`
            : `${name} goes through ${at}, which is a file`,
        );
      }
    }
    return dir;
  }

  /** A file or hard link may replace an earlier file (tar's last-one-wins); anything else is a conflict. */
  #checkReplaceable(existing: TreeNode | undefined, name: string): boolean {
    if (existing === undefined) return false;
    if (existing.kind === 'file') return true;
    throw invalid(`${name} is a file but an earlier entry put a ${existing.kind} there`);
  }

  #isRegularFile(segments: readonly string[]): boolean {
    let node: TreeNode | undefined = this.#tree;
    for (const segment of segments) node = childOf(node, segment);
    return segments.length > 0 && node?.kind === 'file';
  }

  async #writeFile(entry: tar.ReadEntry, abs: string, size: number, mode: number, replace: boolean, name: string): Promise<void> {
    if (replace) await fs.unlink(abs);
    // O_EXCL|O_NOFOLLOW: a fresh inode, never an existing file or a link's target.
    const flags = fsConstants.O_WRONLY | fsConstants.O_CREAT | fsConstants.O_EXCL | fsConstants.O_NOFOLLOW;
    const handle = await fs.open(abs, flags, 0o600);
    try {
      let written = 0;
      // Minipass's iterator never settles if the entry is destroyed between two next() calls, so the
      // failed flag is checked right before each one (nothing awaits between the check and next()).
      if (this.#failed) return;
      for await (const chunk of entry as AsyncIterable<Buffer>) {
        written += chunk.length;
        this.#writtenBytes += chunk.length;
        if (written > size) throw invalid(`${name} holds more data than its header declares`);
        if (this.#writtenBytes > this.#limits.maxExpandedBytes) {
          throw invalid(`archive expands to more than ${this.#limits.maxExpandedBytes} bytes (at ${name})`);
        }
        let offset = 0;
        while (offset < chunk.length) {
          const { bytesWritten } = await handle.write(chunk, offset);
          offset += bytesWritten;
        }
        if (this.#failed) break;
      }
      if (this.#failed) return;
      if (written !== size) throw invalid(`${name} is truncated (${written} of ${size} bytes)`);
      await handle.chmod(mode);
    } finally {
      await handle.close();
      if (this.#current === entry) this.#current = undefined;
    }
  }

  async #createSymlinks(signal: AbortSignal | undefined): Promise<void> {
    // Checked again against the whole tree: a later symlink can change where an earlier one's ".." lands.
    for (const link of this.#symlinks) {
      const why = symlinkEscape(this.#tree, link.segments.slice(0, -1), link.target, true);
      if (why !== undefined) throw invalid(`archive entry ${quote(link.raw)} is a symlink to ${quote(link.target)}, which ${why}`);
    }
    if (!this.#write) return;
    for (const link of this.#symlinks) {
      signal?.throwIfAborted();
      try {
        await fs.symlink(link.target, path.join(this.#root, ...link.segments));
      } catch (err) {
        throw describeFsError(err, link.raw);
      }
    }
  }

  async #applyDirModes(signal: AbortSignal | undefined): Promise<void> {
    for (const { abs, node } of this.#dirModes) {
      signal?.throwIfAborted();
      // Owner keeps rwx so Slipway can always write the Dockerfile and clean up; no setgid/sticky.
      if (node.mode !== undefined) await fs.chmod(abs, (node.mode & 0o777) | 0o700);
    }
  }
}

function entryKind(type: string): 'file' | 'dir' | 'symlink' | 'hardlink' | undefined {
  switch (type) {
    case 'File':
    case 'OldFile':
      return 'file';
    case 'Directory':
      return 'dir';
    case 'SymbolicLink':
      return 'symlink';
    case 'Link':
      return 'hardlink';
    default:
      return undefined; // devices, FIFOs, contiguous files, GNU dump dirs
  }
}

/** fs errors caused by colliding entries become validation errors naming the entry; others (ENOSPC, EACCES…) pass through. */
function describeFsError(err: unknown, raw: string): unknown {
  if (err instanceof DomainError) return err;
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  if (code !== undefined && CONFLICT_CODES.has(code)) {
    return new DomainError('validation_error', `archive entry ${quote(raw)} cannot be extracted (${code})`, { cause: err });
  }
  return err;
}

async function assertGzip(archivePath: string): Promise<void> {
  const handle = await fs.open(archivePath, 'r');
  try {
    const head = Buffer.alloc(GZIP_MAGIC.length);
    const { bytesRead } = await handle.read(head, 0, head.length, 0);
    if (bytesRead === 0) throw invalid('archive is empty (0 bytes); expected a gzip-compressed tar');
    if (bytesRead < head.length || !head.equals(GZIP_MAGIC)) throw invalid('archive is not gzip-compressed; expected a .tar.gz');
  } finally {
    await handle.close();
  }
}

/**
 * Extracts the gzip-compressed tar at `archivePath` into `destDir` (which must not exist yet; it is created),
 * checking every entry strictly. Two passes: the first reads only the headers and writes nothing, so
 * an archive over the limits (the sum of its entries' declared sizes, or their count) or with any bad
 * entry is refused before a single file is written; the second extracts. On any violation it removes destDir and throws
 * DomainError('validation_error', <clear message naming the entry and the problem>).
 *
 * Accepted: regular files (mode kept, setuid/setgid/sticky dropped), directories, symlinks whose target
 * stays inside the tree (lexically and through the archive's other symlinks), hard links to an earlier
 * regular file; "./" prefixes; pax and GNU long-name headers. Everything else is refused, not skipped.
 * Ownership and timestamps are not restored. Streams throughout: memory does not grow with the archive.
 * If `destDir` already exists the fs error is thrown and it is left alone. An aborted `signal` rejects
 * with its reason (and destDir is removed).
 */
export async function extractArchive(
  archivePath: string,
  destDir: string,
  limits: ArchiveLimits,
  signal?: AbortSignal,
): Promise<{ entries: number; expandedBytes: number }> {
  signal?.throwIfAborted();
  await assertGzip(archivePath);
  const root = path.resolve(destDir);
  await new ArchiveExtraction(root, limits, false).run(archivePath, signal);
  // The upload's own directory is Slipway's (private); the source root inside it is the app's.
  await fs.mkdir(path.dirname(root), { recursive: true, mode: 0o700 });
  await fs.mkdir(root, { mode: 0o755 });
  try {
    return await new ArchiveExtraction(root, limits, true).run(archivePath, signal);
  } catch (err) {
    await fs.rm(root, { recursive: true, force: true });
    throw err;
  }
}

/**
 * Writes `content` at relative `relPath` inside `rootDir` (creating parent dirs), refusing any path that escapes
 * rootDir or passes through a symlink. An existing file, or a symlink, at `relPath` is replaced (atomically, by
 * rename, so a symlink's target is never written); an existing directory there is refused.
 */
export async function writeFileInside(rootDir: string, relPath: string, content: string): Promise<void> {
  const segments = splitSafePath(relPath, 'path');
  const last = segments.pop();
  if (last === undefined) throw invalid(`path ${quote(relPath)} names the source root, not a file`);
  let dir = path.resolve(rootDir);
  for (const segment of segments) {
    dir = path.join(dir, segment);
    const stat = await fs.lstat(dir).catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') return undefined;
      throw err;
    });
    if (stat === undefined) await fs.mkdir(dir, { mode: 0o755 });
    else if (stat.isSymbolicLink()) throw invalid(`path ${quote(relPath)} passes through a symbolic link`);
    else if (!stat.isDirectory()) throw invalid(`path ${quote(relPath)} passes through a file`);
  }
  const file = path.join(dir, last);
  const existing = await fs.lstat(file).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return undefined;
    throw err;
  });
  if (existing?.isDirectory()) throw invalid(`path ${quote(relPath)} is a directory`);
  const temp = path.join(dir, `.slipway-${randomBytes(8).toString('hex')}.tmp`);
  try {
    await fs.writeFile(temp, content, { flag: 'wx', mode: 0o644 });
    await fs.rename(temp, file);
  } catch (err) {
    await fs.rm(temp, { force: true });
    throw err;
  }
}
