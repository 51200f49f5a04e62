// Small HTML error pages the app proxy answers with when it cannot reach an app (404/502/503/504).
import { STATUS_CODES, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';

/** One error page: its status, a short title and a sentence saying what happened. */
export interface Page {
  readonly status: number;
  readonly title: string;
  readonly detail: string;
}

/** 404: no app or tunnel is registered under this host. */
export function notFoundPage(host: string): Page {
  return { status: 404, title: 'App not found', detail: `No app is deployed at ${host}.` };
}

/** 503: the host exists but is not serving right now (`reason` says why, in plain words). */
export function unavailablePage(host: string, reason: string): Page {
  return { status: 503, title: 'App unavailable', detail: `${host} is not available: ${reason}.` };
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

/** Writes a page as the response (unless headers were already sent, in which case it aborts the response). */
export function writePage(res: ServerResponse, page: Page): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body = renderPage(page);
  // The reason phrase is given: a refused upstream head may have left its own in res.statusMessage.
  res.writeHead(page.status, STATUS_CODES[page.status] ?? 'Error', {
    'content-type': 'text/html; charset=utf-8',
    'content-length': Buffer.byteLength(body),
    'cache-control': 'no-store',
  });
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
    'Connection: close\r\n\r\n';
  socket.end(head + body);
}

/** Escapes the five HTML-significant characters. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}
