// Plain HTTP once a host has a certificate: 308 to the same URL on https://, ACME challenges excepted (decisions §8).
import type { IncomingMessage, ServerResponse } from 'node:http';

/** The host of a Host header: lower case, without port or trailing dot; undefined for none or an IP literal in brackets. */
export function hostOf(hostHeader: string | undefined): string | undefined {
  if (hostHeader === undefined) return undefined;
  let host = hostHeader.trim().toLowerCase();
  if (host === '' || host.startsWith('[')) return undefined;
  const colon = host.lastIndexOf(':');
  if (colon !== -1) host = host.slice(0, colon);
  if (host.endsWith('.')) host = host.slice(0, -1);
  return host === '' ? undefined : host;
}

/**
 * Answers 308 to `https://<host>[:port]<path>` when `hasCertificate(host)`; returns false (and does
 * nothing) otherwise. The method and body are kept by the client (308, not 301).
 */
export function redirectToHttps(req: IncomingMessage, res: ServerResponse, httpsPort: number, hasCertificate: (host: string) => boolean): boolean {
  const host = hostOf(req.headers.host);
  if (host === undefined || !hasCertificate(host)) return false;
  const path = (req.url ?? '/').startsWith('/') ? (req.url ?? '/') : '/';
  const location = `https://${host}${httpsPort === 443 ? '' : `:${httpsPort}`}${path}`;
  const body = `Moved to ${location}\n`;
  res.writeHead(308, {
    location,
    'content-type': 'text/plain; charset=utf-8',
    'content-length': Buffer.byteLength(body),
    'cache-control': 'no-store',
  });
  res.end(req.method === 'HEAD' ? undefined : body);
  return true;
}
