// The edge's refusals of what is not yet a request (a malformed or ambiguous head, a head that did not arrive in time): {error, message} JSON for the API host, Slipway's page for app hosts.
import { STATUS_CODES, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { badRequestPage, renderPage, requestTimeoutPage, type Page } from './pages.js';
import { writeBadRequest, writeRawBadRequest } from './request-guard.js';

/** A Host line, whole (its line end seen): a value cut off by the end of what arrived is not trusted. */
const HOST_LINE = /\r\nhost[ \t]*:[ \t]*([^\r\n]*)\r\n/i;
/** How far into a head a Host line is looked for (Node's own limit on a head's size). */
const MAX_HEAD_BYTES = 16 * 1024;

/** One refusal: its status, the `error` and `message` of its JSON body. */
interface Refusal {
  readonly status: number;
  readonly error: string;
  readonly message: string;
}

/**
 * The first Host a head names (as sent), read from its raw bytes, which may be partial or
 * malformed; undefined when no whole Host line is there.
 */
export function hostInHead(bytes: Buffer | undefined): string | undefined {
  if (bytes === undefined) return undefined;
  const text = bytes.toString('latin1', 0, Math.min(bytes.length, MAX_HEAD_BYTES));
  const end = text.indexOf('\r\n\r\n');
  return HOST_LINE.exec(end === -1 ? text : text.slice(0, end + 2))?.[1]?.trim();
}

/** Slipway's page for a refusal (app hosts). */
function pageOf(refusal: Refusal): Page {
  if (refusal.status === 400) return badRequestPage(refusal.message);
  if (refusal.status === 408) return requestTimeoutPage();
  return { status: refusal.status, title: STATUS_CODES[refusal.status] ?? 'Error', detail: `This request could not be read: ${refusal.message}.`, code: refusal.error };
}

/** A refusal as a whole HTTP/1.1 response that closes the connection: a page, or {error, message} JSON. */
export function refusalResponse(refusal: Refusal, asPage: boolean): string {
  const body = asPage ? renderPage(pageOf(refusal)) : JSON.stringify({ error: refusal.error, message: refusal.message });
  return (
    `HTTP/1.1 ${refusal.status} ${STATUS_CODES[refusal.status] ?? 'Error'}\r\n` +
    `Content-Type: ${asPage ? 'text/html' : 'application/json'}; charset=utf-8\r\n` +
    `Content-Length: ${Buffer.byteLength(body)}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n${body}`
  );
}

/** What Node's parser refused (bad request line, bad header, headers over the size limit, broken framing, a body cut off by EOF, a timeout), as the refusal it answers. */
function parserRefusal(code: string | undefined): Refusal {
  if (code === 'HPE_HEADER_OVERFLOW') return { status: 431, error: 'payload_too_large', message: 'the request headers are too large' };
  if (code === 'HPE_CHUNK_EXTENSIONS_OVERFLOW') return { status: 413, error: 'payload_too_large', message: 'the chunk extensions are too large' };
  if (code === 'ERR_HTTP_REQUEST_TIMEOUT') return { status: 408, error: 'validation_error', message: 'the request did not arrive in time' };
  return { status: 400, error: 'validation_error', message: 'malformed HTTP request' };
}

export interface EdgeRefusals {
  /** The HTTP server's `clientError` handler: a head Node's parser refused (or that timed out). */
  clientError(err: NodeJS.ErrnoException & { rawPacket?: unknown }, socket: Duplex): void;
  /** The front door's answer to a first head that did not arrive in time (`bytes`: what did). */
  lateHead(socket: Duplex, bytes: Buffer | undefined): void;
  /** A head the request guard refused (src/proxy/request-guard.ts): 400. */
  badRequest(req: IncomingMessage, res: ServerResponse, problem: string): void;
  /** The same for an upgrade request, on its socket. */
  rawBadRequest(req: IncomingMessage, socket: Duplex, problem: string): void;
}

/**
 * The refusals of one edge. `isAppHost` says whether a Host names an app (a subdomain or a custom
 * domain): its visitors get Slipway's page; every other host, and a head whose Host cannot be read
 * (garbage, a Host line cut off), is the API's and gets JSON, as routing would send it there.
 */
export function edgeRefusals(isAppHost: (host: string) => boolean): EdgeRefusals {
  const asPage = (host: string | undefined): boolean => {
    try {
      return host !== undefined && isAppHost(host);
    } catch {
      return false;
    }
  };
  const end = (socket: Duplex, refusal: Refusal, host: string | undefined): void => {
    if (!socket.writable) {
      socket.destroy();
      return;
    }
    socket.end(refusalResponse(refusal, asPage(host)), () => socket.destroy());
  };
  return {
    clientError(err, socket) {
      // Nothing is written once a response on this socket has started, or to a client that reset.
      const pending = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
      if (err.code === 'ECONNRESET' || !socket.writable || pending?.headersSent === true) {
        socket.destroy();
        return;
      }
      end(socket, parserRefusal(err.code), hostInHead(Buffer.isBuffer(err.rawPacket) ? err.rawPacket : undefined));
    },
    lateHead(socket, bytes) {
      end(socket, parserRefusal('ERR_HTTP_REQUEST_TIMEOUT'), hostInHead(bytes));
    },
    badRequest(req, res, problem) {
      if (!asPage(req.headers.host)) return writeBadRequest(res, problem);
      const page = badRequestPage(problem);
      const body = renderPage(page);
      try {
        res.writeHead(400, 'Bad Request', { 'content-type': 'text/html; charset=utf-8', 'content-length': Buffer.byteLength(body), 'cache-control': 'no-store', connection: 'close' });
        res.end(body);
      } catch {
        res.destroy();
      }
    },
    rawBadRequest(req, socket, problem) {
      if (!asPage(req.headers.host)) return writeRawBadRequest(socket, problem);
      end(socket, { status: 400, error: 'validation_error', message: problem }, req.headers.host);
    },
  };
}
