// Errors answered straight on a socket, where Node has no response object (refused upgrades; unparsable requests are src/proxy/edge-refusals.ts's): the same `{error, message}` JSON as every other error.
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
