// Paths a compose file names (build contexts, env files, secrets, configs) must stay inside the source: no "..", no absolute path, no symlink out.
import fs from 'node:fs';
import path from 'node:path';

/**
 * Why `relative` may not be used from the source at `root`; undefined when it is inside. A path
 * that does not exist is judged by its text alone (the step that reads it reports it missing).
 */
export function sourcePathProblem(root: string, relative: string): string | undefined {
  if (relative.includes('\0')) return 'is not a valid path';
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(relative) || relative.startsWith('git@')) return 'is outside the source (a remote context): it must be a path inside the source';
  if (path.posix.isAbsolute(relative) || path.win32.isAbsolute(relative) || relative.startsWith('~')) return 'is outside the source: it must be a relative path inside it';
  const normalized = path.posix.normalize(relative.replace(/\\/g, '/'));
  if (normalized === '..' || normalized.startsWith('../')) return 'is outside the source (".." leaves it)';
  let realRoot: string;
  try {
    realRoot = fs.realpathSync(root);
  } catch {
    return undefined;
  }
  // Each existing part of the path is resolved: a symbolic link anywhere along it must stay inside.
  let current = realRoot;
  for (const part of normalized.split('/')) {
    if (part === '.' || part === '') continue;
    const next = path.join(current, part);
    let real: string;
    try {
      real = fs.realpathSync(next);
    } catch {
      return undefined;
    }
    if (real !== realRoot && !real.startsWith(realRoot + path.sep)) return 'is outside the source (a symbolic link leads out of it)';
    current = real;
  }
  return undefined;
}

/** A regular file of the source as text (never through a symbolic link out); undefined when absent or not a file. */
export function readSourceFile(root: string, relative: string, maxBytes = 1024 * 1024): string | undefined {
  if (sourcePathProblem(root, relative) !== undefined) return undefined;
  const full = path.join(root, relative);
  try {
    const real = fs.realpathSync(full);
    const stat = fs.statSync(real);
    if (!stat.isFile() || stat.size > maxBytes) return undefined;
    return fs.readFileSync(real, 'utf8');
  } catch {
    return undefined;
  }
}
