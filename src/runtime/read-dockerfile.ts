// Reading a source's Dockerfile safely: a regular file reached without symbolic links, of bounded size.
import { lstat, readFile } from 'node:fs/promises';
import path from 'node:path';
import { EngineBuildError } from './engine.js';

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
