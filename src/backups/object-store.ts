// The port a backup destination is used through: stream an object in, stream it out, delete it; one implementation per destination type.
import type { Readable } from 'node:stream';

/** A failure of a destination, named by the step that failed (decisions §20: resolve, auth, write, read, delete). */
export class DestinationError extends Error {
  override readonly name = 'DestinationError';
  constructor(
    readonly step: 'resolve' | 'auth' | 'write' | 'read' | 'delete',
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

export interface ObjectStore {
  /** Where its objects are, for messages (never a credential). */
  readonly describe: string;
  /** Checks the destination is reachable at all (DNS, the address rule, a connection). */
  reach(signal: AbortSignal): Promise<void>;
  /** Checks the credentials can list the bucket (or the directory exists). */
  authorize(signal: AbortSignal): Promise<void>;
  /**
   * Streams `body` into the object `key` (S3: a multipart upload). On any failure or abort nothing
   * is left behind (the multipart upload is aborted, a partial file removed).
   */
  put(key: string, body: Readable, signal: AbortSignal): Promise<void>;
  /** The object's bytes as a stream. */
  get(key: string, signal: AbortSignal): Promise<Readable>;
  /** The keys of the objects whose key starts with `prefix` (in no particular order). */
  list(prefix: string, signal: AbortSignal): Promise<string[]>;
  /** Removes the object; one already gone is no error. */
  delete(key: string, signal: AbortSignal): Promise<void>;
}

/** The detail of an error, on one line and short (never holding a credential: the SDK's messages do not). */
export const errorDetail = (err: unknown): string => {
  const e = err as { name?: string; message?: string; code?: string } | undefined;
  const text = e?.message !== undefined && e.message !== '' ? e.message : String(e?.name ?? e?.code ?? err);
  return text.split('\n')[0]!.slice(0, 300);
};
