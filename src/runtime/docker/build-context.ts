// The build context sent to the engine: the source directory as a tar stream, minus `.dockerignore`d paths.
import type { Stats } from 'node:fs';
import { lstat, readFile } from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import * as tar from 'tar';
import { parseIgnoreRules } from '../../source/ignore-rules.js';
import { EngineBuildError } from '../engine.js';

/** Largest Dockerfile read for checking (real ones are a few KiB). */
const MAX_DOCKERFILE_BYTES = 1024 * 1024;

/**
 * Reads the Dockerfile at `dockerfile` (relative, forward slashes) inside contextDir, refusing a path
 * with a symbolic link anywhere along it: a git source may carry links to anywhere on the host.
 * Throws EngineBuildError (a failed build) when it is missing, a link, not a file, or too large.
 */
export async function readDockerfile(contextDir: string, dockerfile: string): Promise<string> {
  const parts = dockerfile.split('/').filter((p) => p !== '' && p !== '.');
  if (parts.length === 0 || parts.includes('..')) throw refused(`the Dockerfile path "${dockerfile}" is not inside the source`);
  let current = contextDir;
  for (const [index, part] of parts.entries()) {
    current = path.join(current, part);
    const stat = await lstat(current).catch(() => null);
    const last = index === parts.length - 1;
    if (stat === null) throw refused(`Dockerfile not found at "${dockerfile}" in the source`);
    if (stat.isSymbolicLink()) {
      throw refused(`"${parts.slice(0, index + 1).join('/')}" is a symbolic link; the Dockerfile must be a regular file reached without links`);
    }
    if (last ? !stat.isFile() : !stat.isDirectory()) throw refused(`the Dockerfile at "${dockerfile}" is not a regular file`);
    if (last && stat.size > MAX_DOCKERFILE_BYTES) throw refused(`the Dockerfile is larger than ${MAX_DOCKERFILE_BYTES} bytes`);
  }
  return readFile(current, 'utf8');
}

function refused(message: string): EngineBuildError {
  return new EngineBuildError(message, message);
}

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
