// Errors answered straight on a socket, where Node has no response object (unparsable requests, refused upgrades): the same `{error, message}` JSON as every other error.
import { STATUS_CODES, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { ErrorBody } from './errors.js';

/** Writes one error response on a raw socket and closes it once written. */
export function endSocketWithError(socket: Duplex, status: number, body: ErrorBody): void {
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  const json = JSON.stringify(body);
  const head = [
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Error'}`,
    'Content-Type: application/json; charset=utf-8',
    `Content-Length: ${Buffer.byteLength(json)}`,
    'Cache-Control: no-store',
    'Connection: close',
  ];
  socket.end(`${head.join('\r\n')}\r\n\r\n${json}`, () => socket.destroy());
}

/**
 * The server's `clientError` handler: a request Node's parser refused (bad request line, bad header,
 * headers over the size limit, broken framing, a body cut off by EOF) gets a JSON error instead of
 * Node's bare status line. Nothing is written once a response to an earlier request on the socket
 * has started, or when the client reset the connection.
 */
export function answerClientError(err: NodeJS.ErrnoException, socket: Duplex): void {
  const pending = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
  if (err.code === 'ECONNRESET' || !socket.writable || pending?.headersSent === true) {
    socket.destroy();
    return;
  }
  if (err.code === 'HPE_HEADER_OVERFLOW') {
    endSocketWithError(socket, 431, { error: 'payload_too_large', message: 'the request headers are too large' });
  } else if (err.code === 'HPE_CHUNK_EXTENSIONS_OVERFLOW') {
    endSocketWithError(socket, 413, { error: 'payload_too_large', message: 'the chunk extensions are too large' });
  } else if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
    endSocketWithError(socket, 408, { error: 'validation_error', message: 'the request did not arrive in time' });
  } else {
    endSocketWithError(socket, 400, { error: 'validation_error', message: 'malformed HTTP request' });
  }
}

/** The server's `checkExpectation` handler: an `Expect` other than 100-continue gets 417 as JSON (Node would send a bare status). */
export function answerUnmetExpectation(_req: IncomingMessage, res: ServerResponse): void {
  const json = JSON.stringify({ error: 'validation_error', message: 'unsupported Expect header (only 100-continue)' } satisfies ErrorBody);
  res.writeHead(417, { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': Buffer.byteLength(json), 'Cache-Control': 'no-store', Connection: 'close' });
  res.end(json);
}

/** A 500 `internal_error` answer, without detail (the detail goes to the log). */
export function writeInternalError(res: ServerResponse): void {
  try {
    const body = JSON.stringify({ error: 'internal_error', message: 'The server failed to handle this request.' });
    res.writeHead(500, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body), connection: 'close' });
    res.end(body);
  } catch {
    res.destroy();
  }
}
