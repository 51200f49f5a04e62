// A real S3-protocol server on loopback for tests (s3rver, in the test process): a random port, a temporary directory, one bucket.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';

/** s3rver's credentials (it refuses any other key pair). */
export const S3_ACCESS_KEY = 'S3RVER';
export const S3_SECRET_KEY = 'S3RVER';

interface S3rverInstance {
  run(): Promise<AddressInfo>;
  close(): Promise<void>;
}
type S3rverClass = new (options: Record<string, unknown>) => S3rverInstance;

export interface TestS3 {
  readonly endpoint: string;
  readonly bucket: string;
  readonly directory: string;
  /** The files s3rver holds for the bucket's objects (names relative to the bucket). */
  objectFiles(): Promise<string[]>;
  close(): Promise<void>;
}

/** Starts s3rver on 127.0.0.1 at a random port with bucket `bucket`. */
export async function startS3(bucket = 'backups'): Promise<TestS3> {
  const S3rver = createRequire(import.meta.url)('s3rver') as S3rverClass;
  const directory = await fs.mkdtemp(path.join(os.tmpdir(), 'slipway-s3-'));
  const server = new S3rver({ address: '127.0.0.1', port: 0, directory, silent: true, configureBuckets: [{ name: bucket }] });
  const address = await server.run();
  return {
    endpoint: `http://127.0.0.1:${address.port}`,
    bucket,
    directory,
    async objectFiles() {
      const out: string[] = [];
      const walk = async (dir: string): Promise<void> => {
        for (const entry of await fs.readdir(dir, { withFileTypes: true }).catch(() => [])) {
          const full = path.join(dir, entry.name);
          if (entry.isDirectory()) await walk(full);
          else out.push(path.relative(path.join(directory, bucket), full));
        }
      };
      await walk(path.join(directory, bucket));
      return out.filter((f) => f.endsWith('._S3rver_object'));
    },
    async close() {
      await server.close();
      await fs.rm(directory, { recursive: true, force: true });
    },
  };
}
