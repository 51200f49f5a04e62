// The data directory is private to the server's user: files 0600, directories 0700.
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';

export const PRIVATE_FILE_MODE = 0o600;
export const PRIVATE_DIR_MODE = 0o700;

/**
 * Trees whose modes are the app's own (an upload's extracted source, a build's git checkout): the
 * engine copies those modes into the image, so an entrypoint must stay executable and readable for
 * the app's user. They sit inside private directories, so no other user reaches them.
 */
function isAppTree(rel: string[]): boolean {
  return (rel[0] === 'uploads' && rel.length === 4 && rel[3] === 'src') || (rel[0] === 'work' && rel.length === 2);
}

/**
 * Creates the data directory (0700) and brings what an earlier version left in it to 0600 files and
 * 0700 directories (the database, its WAL, logs, uploads, keys), app source trees aside. Symbolic
 * links and sockets are left alone.
 */
export async function securePrivateDataDir(dataDir: string): Promise<void> {
  await fsp.mkdir(dataDir, { recursive: true, mode: PRIVATE_DIR_MODE });
  await fsp.chmod(dataDir, PRIVATE_DIR_MODE);
  const walk = async (dir: string, rel: string[]): Promise<void> => {
    const entries = await fsp.readdir(dir, { withFileTypes: true }).catch(() => []);
    for (const entry of entries) {
      const full = path.join(dir, entry.name);
      const parts = [...rel, entry.name];
      if (entry.isDirectory()) {
        if (isAppTree(parts)) continue;
        await chmodIfNeeded(full, PRIVATE_DIR_MODE);
        await walk(full, parts);
      } else if (entry.isFile()) {
        await chmodIfNeeded(full, PRIVATE_FILE_MODE);
      }
    }
  };
  await walk(dataDir, []);
}

async function chmodIfNeeded(file: string, mode: number): Promise<void> {
  const stat = await fsp.lstat(file).catch(() => null);
  if (stat === null || (stat.mode & 0o777) === mode) return;
  // A file removed meanwhile (a build's work directory) is no error.
  await fsp.chmod(file, mode).catch(() => undefined);
}

/** Creates `file` empty with mode 0600 when it does not exist yet, and makes it 0600 when it does. */
export function ensurePrivateFile(file: string): void {
  fs.closeSync(fs.openSync(file, 'a', PRIVATE_FILE_MODE));
  fs.chmodSync(file, PRIVATE_FILE_MODE);
}
