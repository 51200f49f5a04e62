// A `local` destination: a directory under the data directory (one host only); an object is written beside its name and renamed when complete.
import fs from 'node:fs';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { DestinationError, errorDetail, type ObjectStore } from './object-store.js';

/** The directory of a local destination. */
export const localDestinationDir = (dataDir: string, destinationId: string): string => path.join(dataDir, 'backups', destinationId);

export function localObjectStore(dir: string): ObjectStore {
  // Keys are Slipway's own (uuids and fixed names), never a user's path; still, nothing escapes the directory.
  const file = (key: string): string => {
    const resolved = path.resolve(dir, key);
    if (!resolved.startsWith(dir + path.sep)) throw new DestinationError('write', `invalid object key ${key}`);
    return resolved;
  };
  return {
    describe: 'the local destination',
    async reach() {
      try {
        await fs.promises.mkdir(dir, { recursive: true, mode: 0o700 });
      } catch (err) {
        throw new DestinationError('resolve', `cannot create the destination's directory: ${errorDetail(err)}`);
      }
    },
    async authorize() {
      try {
        await fs.promises.access(dir, fs.constants.W_OK | fs.constants.R_OK);
      } catch (err) {
        throw new DestinationError('auth', `the destination's directory is not writable: ${errorDetail(err)}`);
      }
    },
    async put(key, body, signal) {
      const target = file(key);
      const partial = `${target}.partial`;
      try {
        await fs.promises.mkdir(path.dirname(target), { recursive: true, mode: 0o700 });
        await pipeline(body, fs.createWriteStream(partial, { mode: 0o600 }), { signal });
        await fs.promises.rename(partial, target);
      } catch (err) {
        await fs.promises.rm(partial, { force: true });
        if (signal.aborted) throw err;
        throw err instanceof DestinationError ? err : new DestinationError('write', `writing ${key} failed: ${errorDetail(err)}`, { cause: err });
      }
    },
    async get(key) {
      const target = file(key);
      try {
        await fs.promises.access(target, fs.constants.R_OK);
      } catch (err) {
        throw new DestinationError('read', `reading ${key} failed: ${errorDetail(err)}`);
      }
      return fs.createReadStream(target);
    },
    async list(prefix) {
      // Keys with a directory part are listed in that directory; written-but-unfinished objects are not objects.
      const slash = prefix.lastIndexOf('/');
      const folder = slash < 0 ? '' : prefix.slice(0, slash + 1);
      let names: string[];
      try {
        names = await fs.promises.readdir(folder === '' ? dir : file(folder));
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
        throw new DestinationError('read', `listing the destination failed: ${errorDetail(err)}`);
      }
      return names.map((name) => folder + name).filter((key) => key.startsWith(prefix) && !key.endsWith('.partial'));
    },
    async delete(key) {
      try {
        await fs.promises.rm(file(key), { force: true });
      } catch (err) {
        throw new DestinationError('delete', `deleting ${key} failed: ${errorDetail(err)}`);
      }
    },
  };
}
