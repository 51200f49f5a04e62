// Where sources live on disk: uploaded archives (immutable, one directory per upload) and staging.
import crypto from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { Transform } from 'node:stream';
import { DomainError } from '../core/errors.js';
import { uploadTooLargeMessage } from '../core/upload-limit.js';
import { PRIVATE_DIR_MODE, PRIVATE_FILE_MODE } from '../secrets/private-data-dir.js';

/**
 * Layout under the data directory:
 *   uploads/<deployment>/<upload>/archive.tar.gz  the archive as received
 *   uploads/<deployment>/<upload>/src/            its validated contents (never changed afterwards)
 *   tmp/                                           staging; anything here after a crash is garbage
 */
export class SourceStore {
  readonly #root: string;

  constructor(dataDir: string) {
    this.#root = dataDir;
  }

  uploadDir(deploymentId: string, uploadId: string): string {
    return path.join(this.#root, 'uploads', deploymentId, uploadId);
  }

  /** The extracted source of an upload: a build's immutable snapshot. */
  sourceDir(deploymentId: string, uploadId: string): string {
    return path.join(this.uploadDir(deploymentId, uploadId), 'src');
  }

  /** A fresh, unique staging path (not created). */
  stagingPath(label: string): string {
    return path.join(this.#root, 'tmp', `${label}-${crypto.randomUUID()}`);
  }

  /** Removes staging leftovers of a previous run (called on start). */
  async clearStaging(): Promise<void> {
    await fsp.rm(path.join(this.#root, 'tmp'), { recursive: true, force: true });
    await fsp.mkdir(path.join(this.#root, 'tmp'), { recursive: true, mode: PRIVATE_DIR_MODE });
  }

  /**
   * Streams `input` to `file` without holding it in memory, counting and hashing it.
   * Over `maxBytes` → payload_too_large (and the partial file is removed).
   */
  async receive(input: Readable, file: string, maxBytes: number): Promise<{ size: number; sha256: string }> {
    await fsp.mkdir(path.dirname(file), { recursive: true, mode: PRIVATE_DIR_MODE });
    const hash = crypto.createHash('sha256');
    let size = 0;
    const meter = new Transform({
      transform(chunk: Buffer, _encoding, callback) {
        size += chunk.length;
        if (size > maxBytes) {
          callback(new DomainError('payload_too_large', uploadTooLargeMessage(maxBytes)));
          return;
        }
        hash.update(chunk);
        callback(null, chunk);
      },
    });
    try {
      await pipeline(input, meter, fs.createWriteStream(file, { flags: 'wx', mode: PRIVATE_FILE_MODE }));
    } catch (err) {
      await fsp.rm(file, { force: true });
      throw err;
    }
    return { size, sha256: hash.digest('hex') };
  }

  /** Moves a staged upload directory into place (a rename: atomic on one filesystem). */
  async commitUpload(staged: string, deploymentId: string, uploadId: string): Promise<void> {
    const target = this.uploadDir(deploymentId, uploadId);
    await fsp.mkdir(path.dirname(target), { recursive: true, mode: PRIVATE_DIR_MODE });
    await fsp.rename(staged, target);
  }

  async removeUpload(deploymentId: string, uploadId: string): Promise<void> {
    await fsp.rm(this.uploadDir(deploymentId, uploadId), { recursive: true, force: true });
  }

  /** Removes every upload of a deployment. */
  async removeDeployment(deploymentId: string): Promise<void> {
    await fsp.rm(path.join(this.#root, 'uploads', deploymentId), { recursive: true, force: true });
  }

  async remove(p: string): Promise<void> {
    await fsp.rm(p, { recursive: true, force: true });
  }

  /** Upload ids on disk for a deployment (for cleaning up ones the database no longer references). */
  async listUploads(deploymentId: string): Promise<string[]> {
    try {
      return await fsp.readdir(path.join(this.#root, 'uploads', deploymentId));
    } catch {
      return [];
    }
  }
}
