// Small HTML error pages the app proxy answers with when it cannot reach an app (404/502/503/504).
import { STATUS_CODES, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';

/** One error page: its status, a short title and a sentence saying what happened. */
export interface Page {
  readonly status: number;
  readonly title: string;
  readonly detail: string;
  /** The `error` of the `{error, message}` body a JSON client gets instead (refusals of the Node edge). */
  readonly code?: string;
  /** Sent as `Retry-After` (seconds): the answer is expected to change soon. */
  readonly retryAfterSeconds?: number;
}

/** 404: no app or tunnel is registered under this host. */
export function notFoundPage(host: string): Page {
  return { status: 404, title: 'App not found', detail: `No app is deployed at ${host}.`, code: 'app_not_found' };
}

/** 503: the host exists but is not serving right now (`reason` says why, in plain words). */
export function unavailablePage(host: string, reason: string): Page {
  return { status: 503, title: 'App unavailable', detail: `${host} is not available: ${reason}.`, code: 'app_unavailable' };
}

/** Why a failed app is not served, in the words of its 503 page. */
export function failedReason(failure: 'source' | 'build' | 'start' | undefined): string {
  switch (failure) {
    case 'source':
      return "its last deploy could not fetch the app's source, so nothing was built (the build log says why)";
    case 'build':
      return "its last deploy's image build failed (the build log says why)";
    case 'start':
      return 'the app failed to start';
    default:
      return 'its last deploy failed (the build log says why)';
  }
}

/** 503 while the app's release is being started (a deploy's first release, or recovery after a restart). */
export function startingPage(host: string): Page {
  return {
    status: 503,
    title: 'App starting',
    detail: `${host} is starting. Try again in a few seconds.`,
    code: 'app_starting',
    retryAfterSeconds: 5,
  };
}

/** 400: the edge could not read the request (`problem` says why, in plain words). */
export function badRequestPage(problem: string): Page {
  return { status: 400, title: 'Bad request', detail: `This request could not be read: ${problem}.`, code: 'validation_error' };
}

/** 408: the request's head did not arrive in time (SLIPWAY_HEADERS_TIMEOUT_SECONDS). */
export function requestTimeoutPage(): Page {
  return { status: 408, title: 'Request timeout', detail: 'The request did not arrive in time.', code: 'validation_error' };
}

/**
 * Whether the client asked for JSON rather than a page: its Accept names `application/json` (or a
 * `+json` type) and not `text/html` (browsers name text/html; curl's `*\/*` gets the page).
 */
export function prefersJson(accept: string | undefined): boolean {
  if (accept === undefined) return false;
  const lower = accept.toLowerCase();
  return /application\/(?:[\w.-]+\+)?json/.test(lower) && !lower.includes('text/html');
}

/** 502: the app's process refused or dropped the connection. */
export function badGatewayPage(host: string): Page {
  return { status: 502, title: 'Bad gateway', detail: `${host} did not accept the connection. It may be restarting.` };
}

/** 504: the app accepted the connection but did not answer in time. */
export function gatewayTimeoutPage(host: string): Page {
  return { status: 504, title: 'Gateway timeout', detail: `${host} did not answer in time.` };
}

/** Renders a page as a short, self-contained HTML document; every dynamic string is escaped. */
export function renderPage(page: Page): string {
  const title = `${page.status} ${escapeHtml(page.title)}`;
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title}</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:36rem;margin:15vh auto;padding:0 1rem;color:#222}h1{font-size:1.4rem}small{color:#777}</style>
</head><body><h1>${title}</h1><p>${escapeHtml(page.detail)}</p><small>Slipway</small></body></html>
`;
}

/**
 * Writes a page as the response (unless headers were already sent, in which case it aborts the
 * response); with `json` and a page that has a code, the body is `{error, message}` instead.
 */
export function writePage(res: ServerResponse, page: Page, json = false): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const asJson = json && page.code !== undefined;
  const body = asJson ? JSON.stringify({ error: page.code, message: page.detail }) : renderPage(page);
  const headers: Record<string, string | number> = {
    'content-type': asJson ? 'application/json; charset=utf-8' : 'text/html; charset=utf-8',
    'content-length': Buffer.byteLength(body),
    'cache-control': 'no-store',
  };
  if (page.retryAfterSeconds !== undefined) headers['retry-after'] = page.retryAfterSeconds;
  // The reason phrase is given: a refused upstream head may have left its own in res.statusMessage.
  res.writeHead(page.status, STATUS_CODES[page.status] ?? 'Error', headers);
  res.end(body);
}

/** Writes a page as a raw HTTP/1.1 response on a socket (an upgrade that cannot be served), then ends it. */
export function writeRawPage(socket: Duplex, page: Page): void {
  if (socket.destroyed || !socket.writable) {
    socket.destroy();
    return;
  }
  const body = renderPage(page);
  const head =
    `HTTP/1.1 ${page.status} ${STATUS_CODES[page.status] ?? 'Error'}\r\n` +
    'Content-Type: text/html; charset=utf-8\r\n' +
    `Content-Length: ${Buffer.byteLength(body)}\r\n` +
    'Cache-Control: no-store\r\n' +
    (page.retryAfterSeconds === undefined ? '' : `Retry-After: ${page.retryAfterSeconds}\r\n`) +
    'Connection: close\r\n\r\n';
  socket.end(head + body);
}

/** Escapes the five HTML-significant characters. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}
