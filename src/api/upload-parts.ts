// Reads a multipart upload as a stream of parts for the upload use-case; every malformed, oversized or cut-off body becomes an error.
import type { IncomingMessage } from 'node:http';
import { PassThrough } from 'node:stream';
import { Busboy, type BusboyFileStream, type BusboyHeaders, type BusboyInstance } from '@fastify/busboy';
import { DomainError } from '../core/errors.js';
import { uploadTooLargeMessage } from '../core/upload-limit.js';
import type { UploadPart } from '../domain/uploads.js';

const malformed = (detail: string): DomainError => new DomainError('validation_error', `malformed multipart body: ${detail}`);

/** Largest text part (and largest `dockerfile` file part, see uploads.ts). */
export const MAX_TEXT_PART_BYTES = 1024 * 1024;
/** What a body may carry beyond its one archive: the dockerfile, small fields, part headers. */
const BODY_OVERHEAD_BYTES = 4 * 1024 * 1024;

export interface PartLimits {
  /** Largest archive part; one more byte is let through so the consumer sees it is over. */
  readonly maxFileBytes: number;
}

/** Whether the Content-Type is multipart/form-data with the boundary busboy needs. */
export function hasMultipartBoundary(contentType: string | undefined): boolean {
  return /;\s*boundary=("[^"]+"|[^\s;]+)/i.test(contentType ?? '');
}

type Event = { readonly part: UploadPart } | { readonly end: true } | { readonly error: unknown };

/**
 * The parts of a multipart request body, in order. Everything that can go wrong ends the iteration
 * with an error, never with silence: a body cut before its closing boundary, a text part over
 * MAX_TEXT_PART_BYTES, too many parts, a body larger than an archive can explain
 * (payload_too_large), and the connection closing mid-body (which also fails the file stream being
 * read, so a consumer writing it to disk is never left waiting). Closing the iteration early stops
 * reading the body.
 */
export async function* multipartParts(raw: IncomingMessage, limits: PartLimits): AsyncGenerator<UploadPart> {
  const queue: Event[] = [];
  let wake: (() => void) | undefined;
  let failed = false;
  const open = new Set<PassThrough>();
  const push = (event: Event): void => {
    queue.push(event);
    wake?.();
    wake = undefined;
  };
  /** The first failure wins; the file streams still open fail with it, so their readers stop. */
  const fail = (error: unknown): void => {
    if (failed) return;
    failed = true;
    for (const stream of open) stream.destroy(error as Error);
    push({ error });
  };

  let parser: BusboyInstance;
  try {
    parser = new Busboy({
      headers: raw.headers as BusboyHeaders,
      limits: { fileSize: limits.maxFileBytes + 1, files: 2, fields: 4, fieldSize: MAX_TEXT_PART_BYTES, parts: 6, headerPairs: 100 },
    });
  } catch (err) {
    throw malformed(err instanceof Error ? err.message : 'unreadable Content-Type');
  }

  parser.on('file', (field: string, file: BusboyFileStream) => {
    // Piped at once into a stream of our own: the consumer may attach later (it reads parts in
    // order), and must then see how the part ended.
    const out = new PassThrough();
    out.on('error', () => undefined); // kept in out.errored for the consumer; never an unheard 'error'
    open.add(out);
    out.on('close', () => {
      open.delete(out);
      // The consumer stopped early (a limit): discard the rest of the part so the parser moves on.
      if (!file.readableEnded) file.resume();
    });
    file.on('error', () => out.destroy(malformed('the body ended inside a file part')));
    file.pipe(out);
    push({ part: { kind: 'file', field, stream: out } });
  });
  parser.on('field', (field: string, value: string, nameTruncated: boolean, valueTruncated: boolean) => {
    if (nameTruncated || valueTruncated) {
      fail(new DomainError('validation_error', `the "${field.slice(0, 100)}" part is larger than the limit of a text part (${MAX_TEXT_PART_BYTES} bytes)`));
      return;
    }
    push({ part: { kind: 'field', field, value } });
  });
  const tooMany = (): void => fail(new DomainError('validation_error', 'too many parts; expected "archive" and optionally "dockerfile"'));
  parser.on('partsLimit', tooMany);
  parser.on('filesLimit', tooMany);
  parser.on('fieldsLimit', tooMany);
  parser.on('error', (err: unknown) => {
    const message = err instanceof Error ? err.message : String(err);
    fail(malformed(/unexpected end/i.test(message) ? 'the body ended before the closing boundary' : message));
  });
  parser.on('finish', () => push({ end: true }));

  // Bounds the body as a whole: busboy discards a text part past its limit but keeps reading it.
  let received = 0;
  const maxBody = limits.maxFileBytes + BODY_OVERHEAD_BYTES;
  const onData = (chunk: Buffer): void => {
    received += chunk.length;
    if (received > maxBody) {
      fail(new DomainError('payload_too_large', uploadTooLargeMessage(limits.maxFileBytes)));
      raw.unpipe(parser);
    }
  };
  // The connection went away (client abort, a server timeout destroying the socket) before the body was whole.
  const onClose = (): void => {
    if (!raw.complete) fail(malformed('the connection closed before the body ended'));
  };
  const onError = (err: Error): void => fail(malformed(`the body could not be read (${err.message})`));
  raw.on('data', onData);
  raw.on('close', onClose);
  raw.on('error', onError);
  raw.pipe(parser);

  try {
    for (;;) {
      const event = queue.shift();
      if (event === undefined) {
        await new Promise<void>((resolve) => (wake = resolve));
        continue;
      }
      if ('error' in event) throw event.error;
      if ('end' in event) {
        if (failed) continue; // the error is queued behind
        return;
      }
      yield event.part;
    }
  } finally {
    raw.off('data', onData);
    raw.off('close', onClose);
    raw.off('error', onError);
    raw.unpipe(parser);
    for (const stream of open) stream.destroy();
  }
}
