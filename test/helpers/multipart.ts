// Test factory for multipart/form-data bodies: an `archive` file part, a `dockerfile` text part, or any crafted part.
import crypto from 'node:crypto';

/** One part of a multipart body. A part with `filename` is sent as a file. */
export interface MultipartPart {
  readonly name: string;
  readonly content: string | Buffer;
  readonly filename?: string;
  readonly contentType?: string;
}

export interface MultipartBody {
  readonly body: Buffer;
  readonly contentType: string;
}

/** A boundary that cannot occur in the parts by chance. */
export const newBoundary = (): string => `----slipway-test-${crypto.randomBytes(12).toString('hex')}`;

/** The header block that opens one part (after the boundary line). */
export function partHead(boundary: string, part: Omit<MultipartPart, 'content'>): string {
  const disposition =
    part.filename === undefined ? `form-data; name="${part.name}"` : `form-data; name="${part.name}"; filename="${part.filename}"`;
  const type = part.contentType ?? (part.filename === undefined ? undefined : 'application/gzip');
  return `--${boundary}\r\nContent-Disposition: ${disposition}\r\n${type === undefined ? '' : `Content-Type: ${type}\r\n`}\r\n`;
}

/** The closing delimiter of a multipart body. */
export const multipartEnd = (boundary: string): string => `\r\n--${boundary}--\r\n`;

/** Builds a multipart/form-data body from parts, in order. */
export function buildMultipart(parts: readonly MultipartPart[], boundary = newBoundary()): MultipartBody {
  const chunks: Buffer[] = [];
  parts.forEach((part, index) => {
    chunks.push(Buffer.from(`${index === 0 ? '' : '\r\n'}${partHead(boundary, part)}`));
    chunks.push(Buffer.isBuffer(part.content) ? part.content : Buffer.from(part.content));
  });
  chunks.push(Buffer.from(parts.length === 0 ? `--${boundary}--\r\n` : multipartEnd(boundary)));
  return { body: Buffer.concat(chunks), contentType: `multipart/form-data; boundary=${boundary}` };
}

/** The usual upload: `archive` (a tar.gz) and optionally `dockerfile` text. */
export function uploadBody(archive: Buffer, dockerfile?: string): MultipartBody {
  const parts: MultipartPart[] = [{ name: 'archive', filename: 'source.tar.gz', content: archive }];
  if (dockerfile !== undefined) parts.push({ name: 'dockerfile', content: dockerfile });
  return buildMultipart(parts);
}

/**
 * A multipart body streamed from an async source of archive bytes, never held in memory:
 * yields the `archive` part's head, the source's chunks, then the end.
 */
export async function* streamUploadBody(boundary: string, archive: AsyncIterable<Buffer>): AsyncGenerator<Buffer> {
  yield Buffer.from(partHead(boundary, { name: 'archive', filename: 'source.tar.gz' }));
  for await (const chunk of archive) yield chunk;
  yield Buffer.from(multipartEnd(boundary));
}
