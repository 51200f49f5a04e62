// A folder packed as tar.gz for upload: ignore rules applied, `.git` and slipway.json left out, symlinks never followed.
import { createWriteStream, type Dirent } from 'node:fs';
import { lstat, readFile, readdir, readlink, realpath } from 'node:fs/promises';
import path from 'node:path';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import * as tar from 'tar';
import { CliError, EXIT_INTERRUPTED } from './cli-error.js';
import { parseIgnoreRules, type IgnoreMatcher } from '../source/ignore-rules.js';

/** The file in a deployed folder that links it to its deployment; never uploaded. */
export const LINK_FILE = 'slipway.json';

export interface PackOptions {
  /** Dockerfile path relative to the folder (forward slashes): always sent, like `.dockerignore`. */
  dockerfile: string;
  /** Called for each entry left out for safety (links out of the folder, sockets, devices). */
  onWarning?: (message: string) => void;
  /** Called with the compressed bytes written so far. */
  onProgress?: (bytes: number) => void;
  /** Called with what will be archived, before anything is packed: it may refuse by throwing. */
  beforePack?: (listing: SourceListing) => Promise<void>;
  /** Packing stops with PackTooLarge as soon as the archive passes this many bytes. */
  maxBytes?: number;
  signal?: AbortSignal;
}

/** The archive passed PackOptions.maxBytes while it was being packed (it is left incomplete). */
export class PackTooLarge extends Error {
  override readonly name = 'PackTooLarge';
}

export interface SourceListing {
  /** The folder's real path (what the archive is relative to). */
  root: string;
  /** Entries to archive, relative, parents before children. */
  entries: string[];
  /** Symlinks kept, by relative path: the (relative) target stored in the archive. */
  links: Map<string, string>;
  /** Which ignore file applied, if any. */
  ignoreFile: '.dockerignore' | '.gitignore' | undefined;
}

/**
 * Lists what `packFolder` will archive. Rules: `.dockerignore` if present, else `.gitignore`;
 * `.git` directories and the top-level slipway.json are always left out; the Dockerfile and
 * `.dockerignore` are always kept. A symlink is kept (as a link) only when its target, resolved
 * both by name and on disk, stays inside the folder; absolute targets inside are made relative.
 * Other links, sockets, FIFOs and devices are skipped with a warning. Nothing is ever followed.
 */
export async function listSource(dir: string, options: Pick<PackOptions, 'dockerfile' | 'onWarning'>): Promise<SourceListing> {
  let root: string;
  try {
    root = await realpath(dir);
    if (!(await lstat(root)).isDirectory()) throw new Error('not a directory');
  } catch {
    throw new CliError(`${dir} is not a folder`);
  }
  const warn = options.onWarning ?? (() => undefined);
  let ignoreFile: SourceListing['ignoreFile'];
  let matcher: IgnoreMatcher | undefined;
  for (const [name, flavor] of [['.dockerignore', 'dockerignore'], ['.gitignore', 'gitignore']] as const) {
    const text = await readFile(path.join(root, name), 'utf8').catch(() => undefined);
    if (text !== undefined) {
      ignoreFile = name;
      matcher = parseIgnoreRules(text, flavor);
      break;
    }
  }
  const alwaysKept = new Set([options.dockerfile, '.dockerignore']);
  const entries: string[] = [];
  const links = new Map<string, string>();

  const walk = async (relDir: string): Promise<void> => {
    let children: Dirent[];
    try {
      children = await readdir(path.join(root, relDir), { withFileTypes: true });
    } catch (err) {
      throw new CliError(`cannot read ${path.join(root, relDir)}: ${(err as Error).message}`);
    }
    children.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    for (const child of children) {
      const rel = relDir === '' ? child.name : `${relDir}/${child.name}`;
      if (child.name === '.git' || rel === LINK_FILE) continue;
      const isDir = child.isDirectory();
      const excluded = !alwaysKept.has(rel) && matcher !== undefined && matcher.excludes(rel, isDir);
      if (isDir) {
        if (!excluded) entries.push(rel);
        if (!excluded || matcher?.mayReincludeBelow(rel) === true) await walk(rel);
      } else if (excluded) {
        continue;
      } else if (child.isFile()) {
        entries.push(rel);
      } else if (child.isSymbolicLink()) {
        const target = await safeLinkTarget(root, rel);
        if (target === undefined) {
          const raw = await readlink(path.join(root, rel)).catch(() => '?');
          warn(`skipped ${rel} -> ${raw}: the link points outside ${dir} (it is never followed)`);
          continue;
        }
        entries.push(rel);
        links.set(rel, target);
      } else {
        warn(`skipped ${rel}: not a regular file, folder or link`);
      }
    }
  };
  await walk('');
  return { root, entries, links, ignoreFile };
}

/** The relative target to store for symlink `rel`, or undefined when it leads out of `root`. */
async function safeLinkTarget(root: string, rel: string): Promise<string | undefined> {
  const abs = path.join(root, rel);
  const raw = await readlink(abs);
  const resolved = path.resolve(path.dirname(abs), raw);
  if (!isInside(root, resolved)) return undefined;
  // Resolved by name it stays inside; through other links on disk it must too.
  const real = await realpath(abs).catch(() => undefined);
  if (real !== undefined && !isInside(root, real)) return undefined;
  const relative = path.relative(path.dirname(abs), resolved);
  return (relative === '' ? '.' : relative).split(path.sep).join('/');
}

function isInside(root: string, candidate: string): boolean {
  const rel = path.relative(root, candidate);
  return rel === '' || (!rel.startsWith('..') && !path.isAbsolute(rel));
}

export interface PackResult {
  /** Bytes of the tar.gz written. */
  bytes: number;
  /** Entries archived. */
  entries: number;
  ignoreFile: SourceListing['ignoreFile'];
}

/** Packs `dir` (see listSource for the rules) as tar.gz into `file` (created with mode 0600). */
export async function packFolder(dir: string, file: string, options: PackOptions): Promise<PackResult> {
  const listing = await listSource(dir, options);
  await options.beforePack?.(listing);
  let changed: string | undefined;
  const pack = tar.c(
    {
      cwd: listing.root,
      gzip: true,
      portable: true,
      follow: false,
      noDirRecurse: true,
      // Called just before each header is written: only the targets checked above are ever stored,
      // even if a link is swapped while packing.
      onWriteEntry: (entry) => {
        if (entry.type !== 'SymbolicLink') return;
        const target = listing.links.get(entry.path);
        if (target === undefined) changed ??= entry.path;
        entry.linkpath = target ?? '.';
      },
    },
    listing.entries,
  );
  let bytes = 0;
  const counter = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      bytes += chunk.length;
      if (options.maxBytes !== undefined && bytes > options.maxBytes) {
        callback(new PackTooLarge(`the archive passed ${options.maxBytes} bytes`));
        return;
      }
      options.onProgress?.(bytes);
      callback(null, chunk);
    },
  });
  try {
    await pipeline(
      Readable.from(pack, { objectMode: false }),
      counter,
      createWriteStream(file, { mode: 0o600, flags: 'wx' }),
      options.signal === undefined ? {} : { signal: options.signal },
    );
  } catch (err) {
    if (options.signal?.aborted === true) throw new CliError('interrupted', { exitCode: EXIT_INTERRUPTED });
    if (err instanceof PackTooLarge) throw err;
    throw new CliError(`cannot pack ${dir}: ${(err as Error).message}`);
  }
  if (changed !== undefined) throw new CliError(`${changed} changed while packing ${dir}: try again`);
  return { bytes, entries: listing.entries.length, ignoreFile: listing.ignoreFile };
}
