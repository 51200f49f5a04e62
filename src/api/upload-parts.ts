// Reads a multipart upload as a stream of parts for the upload use-case, turning every malformed body into a 400.
import { finished, PassThrough, type Readable } from 'node:stream';
import type { FastifyRequest } from 'fastify';
import type { MultipartFile, MultipartValue } from '@fastify/multipart';
import { DomainError } from '../core/errors.js';
import type { UploadPart } from '../domain/uploads.js';

const malformed = (detail: string): DomainError => new DomainError('validation_error', `malformed multipart body: ${detail}`);

/**
 * When the body ends inside a file part, busboy destroys the part's stream without an error, and a
 * consumer that attaches after that (the upload first creates its staging directory) waits forever.
 * Piping the part at once into a stream of our own turns that into a validation error instead.
 */
function guardFileStream(file: Readable): Readable {
  const out = new PassThrough();
  // The error is kept in out.errored for the consumer, who may attach later; no 'error' may go unheard meanwhile.
  out.on('error', () => undefined);
  file.pipe(out);
  finished(file, (err) => {
    if (err !== undefined && err !== null) out.destroy(malformed(`the body ended inside a file part`));
  });
  // The consumer gave up (e.g. the size limit): stop reading the part too, as a pipeline would.
  out.on('close', () => {
    if (!file.readableEnded) file.destroy();
  });
  return out;
}

/** Whether the Content-Type is multipart/form-data with the boundary busboy needs. */
export function hasMultipartBoundary(contentType: string | undefined): boolean {
  return /;\s*boundary=("[^"]+"|[^\s;]+)/i.test(contentType ?? '');
}

/**
 * The parts of a multipart request, in order. Errors of the multipart parser (bad framing, a body
 * cut short) are the client's: validation_error. Errors with their own status (limits) keep it.
 */
export async function* multipartParts(request: FastifyRequest): AsyncGenerator<UploadPart> {
  const parts = request.parts()[Symbol.asyncIterator]();
  for (;;) {
    let next: IteratorResult<MultipartFile | MultipartValue>;
    try {
      next = await parts.next();
    } catch (err) {
      const status = (err as { statusCode?: unknown }).statusCode;
      if (err instanceof DomainError || (typeof status === 'number' && status < 500)) throw err;
      throw malformed(err instanceof Error ? err.message : 'unreadable');
    }
    if (next.done === true) return;
    const part = next.value;
    if (part.type === 'file') {
      yield { kind: 'file', field: part.fieldname, stream: guardFileStream(part.file) };
    } else {
      if (part.valueTruncated || part.fieldnameTruncated) {
        throw new DomainError('validation_error', `the "${part.fieldname.slice(0, 100)}" part is larger than the limit of a text part`);
      }
      yield { kind: 'field', field: part.fieldname, value: String(part.value) };
    }
  }
}
