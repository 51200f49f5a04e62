// An S3 (or S3-compatible) destination through the AWS SDK v3: multipart uploads by lib-storage, aborted on failure; path-style or virtual-host addressing.
import net from 'node:net';
import type { Readable } from 'node:stream';
import { DeleteObjectCommand, GetObjectCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import type { S3Settings } from './backup-store.js';
import { DestinationError, errorDetail, type ObjectStore } from './object-store.js';
import { refusedTarget } from './target-address.js';

/** Time to open a connection to the endpoint. */
const CONNECT_TIMEOUT_MS = 5_000;
/** Time one request may take without progress. */
const REQUEST_TIMEOUT_MS = 30_000;
/** Size of a multipart upload's part: what the upload holds in memory per part in flight. */
const PART_BYTES = 8 * 1024 * 1024;
/** Parts uploaded at once. */
const PARTS_IN_FLIGHT = 2;

export function s3ObjectStore(settings: S3Settings, secret: string, allowPrivate: boolean): ObjectStore {
  const endpoint = new URL(settings.endpoint);
  const client = new S3Client({
    endpoint: settings.endpoint,
    region: settings.region,
    forcePathStyle: settings.force_path_style,
    credentials: { accessKeyId: settings.access_key_id, secretAccessKey: secret },
    maxAttempts: 2,
    requestHandler: { connectionTimeout: CONNECT_TIMEOUT_MS, requestTimeout: REQUEST_TIMEOUT_MS },
  });
  const full = (key: string): string => `${settings.prefix}${key}`;
  const where = `s3 bucket ${settings.bucket} at ${endpoint.host}`;
  return {
    describe: where,

    async reach(signal) {
      const refused = await refusedTarget(endpoint, allowPrivate);
      if (refused !== undefined) throw new DestinationError('resolve', refused);
      const port = endpoint.port === '' ? (endpoint.protocol === 'https:' ? 443 : 80) : Number(endpoint.port);
      await new Promise<void>((resolve, reject) => {
        const socket = net.connect({ host: endpoint.hostname.replace(/^\[|\]$/g, ''), port });
        const fail = (err: Error): void => {
          socket.destroy();
          reject(new DestinationError('resolve', `cannot reach ${endpoint.host}: ${errorDetail(err)}`));
        };
        const timer = setTimeout(() => fail(new Error(`no connection within ${CONNECT_TIMEOUT_MS / 1000} s`)), CONNECT_TIMEOUT_MS);
        const onAbort = (): void => fail(new Error('aborted'));
        signal.addEventListener('abort', onAbort, { once: true });
        socket.once('error', (err) => {
          clearTimeout(timer);
          signal.removeEventListener('abort', onAbort);
          fail(err);
        });
        socket.once('connect', () => {
          clearTimeout(timer);
          signal.removeEventListener('abort', onAbort);
          socket.end();
          resolve();
        });
      });
    },

    async authorize(signal) {
      try {
        await client.send(new ListObjectsV2Command({ Bucket: settings.bucket, Prefix: settings.prefix, MaxKeys: 1 }), { abortSignal: signal });
      } catch (err) {
        throw new DestinationError('auth', `${where} refused the credentials or the bucket: ${errorDetail(err)}`, { cause: err });
      }
    },

    async put(key, body, signal) {
      const upload = new Upload({
        client,
        params: { Bucket: settings.bucket, Key: full(key), Body: body },
        partSize: PART_BYTES,
        queueSize: PARTS_IN_FLIGHT,
        // A failed upload aborts its multipart upload: nothing half-uploaded is left behind.
        leavePartsOnError: false,
      });
      const onAbort = (): void => void upload.abort().catch(() => undefined);
      signal.addEventListener('abort', onAbort, { once: true });
      try {
        await upload.done();
      } catch (err) {
        body.destroy();
        if (signal.aborted) throw signal.reason instanceof Error ? signal.reason : new Error('aborted');
        throw err instanceof DestinationError ? err : new DestinationError('write', `the upload to ${where} failed: ${errorDetail(err)}`, { cause: err });
      } finally {
        signal.removeEventListener('abort', onAbort);
      }
    },

    async get(key, signal) {
      try {
        const out = await client.send(new GetObjectCommand({ Bucket: settings.bucket, Key: full(key) }), { abortSignal: signal });
        if (out.Body === undefined) throw new Error('empty answer');
        return out.Body as Readable;
      } catch (err) {
        throw new DestinationError('read', `reading ${key} from ${where} failed: ${errorDetail(err)}`, { cause: err });
      }
    },

    async list(prefix, signal) {
      const keys: string[] = [];
      let token: string | undefined;
      try {
        do {
          const page = await client.send(new ListObjectsV2Command({ Bucket: settings.bucket, Prefix: full(prefix), ContinuationToken: token }), { abortSignal: signal });
          for (const item of page.Contents ?? []) if (item.Key !== undefined) keys.push(item.Key.slice(settings.prefix.length));
          token = page.IsTruncated === true ? page.NextContinuationToken : undefined;
        } while (token !== undefined);
      } catch (err) {
        throw new DestinationError('read', `listing ${where} failed: ${errorDetail(err)}`, { cause: err });
      }
      return keys;
    },

    async delete(key, signal) {
      try {
        await client.send(new DeleteObjectCommand({ Bucket: settings.bucket, Key: full(key) }), { abortSignal: signal });
      } catch (err) {
        throw new DestinationError('delete', `deleting ${key} from ${where} failed: ${errorDetail(err)}`, { cause: err });
      }
    },
  };
}
