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
 * file fails the build (EngineBuildError).
 */
export async function buildContext(contextDir: string, dockerfile: string): Promise<Readable> {
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
  return Readable.from(pack, { objectMode: false });
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
