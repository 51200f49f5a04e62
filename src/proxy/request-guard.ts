// Checks every request head before routing: one unambiguous Host, an unambiguous body framing and target.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';

/** A host name or IPv4 address, or a bracketed IPv6 literal, with an optional port. */
const HOST_SYNTAX = /^(?:[a-z0-9_](?:[a-z0-9_.-]*[a-z0-9_])?\.?|\[[0-9a-f:.]+\])(?::\d{1,5})?$/i;

/**
 * Why a request must be refused before routing (the message of a 400 `validation_error`), or
 * undefined. The edge routes by Host and the app may read a different copy of it, so every way the
 * two could disagree is refused: more than one Host header (Node keeps the first, many apps the
 * last), a Host that is not a host, and an absolute-form target naming another host. Body framing:
 * llhttp already refuses two Content-Lengths, two Transfer-Encodings and Transfer-Encoding with
 * Content-Length; a Transfer-Encoding whose last coding is not `chunked` has no framing we could
 * forward (RFC 9112 §6.3), so it is refused too.
 */
export function requestHeadProblem(req: IncomingMessage): string | undefined {
  const raw = req.rawHeaders;
  let hosts = 0;
  for (let i = 0; i < raw.length; i += 2) if (raw[i]?.toLowerCase() === 'host') hosts++;
  if (hosts > 1) return 'the request has more than one Host header';
  const host = req.headers.host;
  const hostProblem = hostHeaderProblem(host);
  if (hostProblem !== undefined) return hostProblem;

  const encoding = req.headers['transfer-encoding'];
  if (encoding !== undefined) {
    const codings = encoding.split(',').map((c) => c.trim().toLowerCase());
    if (codings.at(-1) !== 'chunked') return 'Transfer-Encoding must end with chunked';
  }

  const target = requestTarget(req.method ?? 'GET', req.url ?? '', host);
  if (typeof target !== 'string') return target.problem;
  // Same host: pass the path on, as an origin server would see it.
  req.url = target;
  return undefined;
}

/** Why a Host header value (undefined: none) cannot be routed on, or undefined. */
export function hostHeaderProblem(host: string | undefined): string | undefined {
  if (host !== undefined && !HOST_SYNTAX.test(host.trim())) return 'the Host header is not a host name';
  return undefined;
}

/**
 * The origin-form target of a request (`/path?query`), or why it must be refused. Absolute form
 * ("GET http://host/path"): RFC 9112 §3.2.2 lets its authority override Host, so it must name the
 * same host; it is then turned into the path an origin server would see.
 */
export function requestTarget(method: string, url: string, host: string | undefined): string | { problem: string } {
  if (url.startsWith('/') || (url === '*' && method === 'OPTIONS')) return url;
  let target: URL;
  try {
    target = new URL(url);
  } catch {
    return { problem: 'the request target is not a path' };
  }
  if (host === undefined || target.host.toLowerCase() !== host.trim().toLowerCase()) {
    return { problem: 'the request target names a different host than the Host header' };
  }
  return `${target.pathname}${target.search}`;
}

/** Answers a refused request: 400 `validation_error` as JSON, and the connection is closed after it. */
export function writeBadRequest(res: ServerResponse, message: string): void {
  const body = JSON.stringify({ error: 'validation_error', message });
  try {
    res.writeHead(400, 'Bad Request', {
      'content-type': 'application/json; charset=utf-8',
      'content-length': Buffer.byteLength(body),
      'cache-control': 'no-store',
      connection: 'close',
    });
    res.end(body);
  } catch {
    res.destroy();
  }
}

/** The same answer for an upgrade request, written raw on its socket. */
export function writeRawBadRequest(socket: Duplex, message: string): void {
  const body = JSON.stringify({ error: 'validation_error', message });
  socket.end(
    'HTTP/1.1 400 Bad Request\r\nContent-Type: application/json; charset=utf-8\r\n' +
      `Content-Length: ${Buffer.byteLength(body)}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n${body}`,
  );
}
