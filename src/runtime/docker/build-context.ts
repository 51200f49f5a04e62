// The build context sent to the engine: the source directory as a tar stream, minus `.dockerignore`d paths.
import type { Stats } from 'node:fs';
import { lstat, readFile } from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import * as tar from 'tar';
import { parseIgnoreRules } from '../../source/ignore-rules.js';
import { EngineBuildError } from '../engine.js';

/**
 * The context directory as an uncompressed tar stream, filtered by its `.dockerignore`
 * (the Dockerfile and .dockerignore themselves are always sent, as the docker CLI does).
 * Symbolic links are archived as links, never followed; a .dockerignore that is not a regular
 * file fails the build (EngineBuildError). `generated`: the text of a Dockerfile the source does
 * not have (decisions §24), sent at `dockerfile` ahead of the directory; the source is not touched.
 */
export async function buildContext(contextDir: string, dockerfile: string, generated?: string): Promise<Readable> {
  let ignore: string | null = null;
  // lstat, never stat: a .dockerignore that is a link (to /etc/shadow, say) is not read through.
  const ignoreStat = await lstat(path.join(contextDir, '.dockerignore')).catch(() => null);
  if (ignoreStat !== null) {
    if (!ignoreStat.isFile()) throw refused('.dockerignore must be a regular file, not a symbolic link or anything else');
    ignore = await readFile(path.join(contextDir, '.dockerignore'), 'utf8');
  }
  const excluded = ignore === null ? () => false : dockerignoreMatcher(ignore);
  const pack = tar.c(
    {
      cwd: contextDir,
      portable: true,
      follow: false,
      filter: (entryPath: string, stat: Stats | tar.ReadEntry) => {
        const rel = entryPath.replace(/^\.\/?/, '');
        if (rel === '' || rel === dockerfile || rel === '.dockerignore') return true;
        const isDir = 'isDirectory' in stat ? stat.isDirectory() : stat.type === 'Directory';
        return !excluded(rel, isDir);
      },
    },
    ['.'],
  );
  if (generated === undefined) return Readable.from(pack, { objectMode: false });
  return Readable.from(leadingFile(dockerfile, generated, pack), { objectMode: false });
}

/** A tar entry for `file` with `text`, then the rest of the archive (which carries the end-of-archive blocks). */
async function* leadingFile(file: string, text: string, rest: AsyncIterable<Buffer>): AsyncGenerator<Buffer> {
  const data = Buffer.from(text, 'utf8');
  if (Buffer.byteLength(file) > 99) throw refused(`the Dockerfile path "${file}" is too long for a generated Dockerfile (99 bytes at most)`);
  // A fixed time and owner: the same text gives the same entry, so the engine's layer cache holds.
  const header = new tar.Header({ path: file, mode: 0o644, uid: 0, gid: 0, size: data.length, mtime: new Date(0), type: 'File' });
  header.encode();
  if (header.block === undefined) throw refused('the generated Dockerfile could not be added to the build context');
  yield header.block;
  yield data;
  const pad = (512 - (data.length % 512)) % 512;
  if (pad > 0) yield Buffer.alloc(pad);
  yield* rest;
}

/**
 * A matcher for `.dockerignore` rules (see source/ignore-rules.ts): true when a path stays out of
 * the build context. An excluded directory is still walked when an exception may match inside it,
 * so `!dir/keep` works.
 */
export function dockerignoreMatcher(text: string): (path: string, isDirectory: boolean) => boolean {
  const rules = parseIgnoreRules(text, 'dockerignore');
  return (path, isDirectory) => rules.excludes(path, isDirectory) && !(isDirectory && rules.mayReincludeBelow(path));
}

function refused(message: string): EngineBuildError {
  return new EngineBuildError(message, message);
}
