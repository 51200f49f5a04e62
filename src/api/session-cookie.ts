// The dashboard's session cookie: HttpOnly, SameSite=Strict, host-only (apps on subdomains never see it), Secure with the __Host- prefix over HTTPS; unsafe requests made with it carry a CSRF token bound to the session.
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { FastifyRequest } from 'fastify';

/** Over HTTPS: the browser refuses a __Host- cookie that is not Secure, host-only and Path=/. */
export const SECURE_SESSION_COOKIE = '__Host-slipway_session';
/** Over plain HTTP (localhost), where Secure cookies would not be kept. */
export const SESSION_COOKIE = 'slipway_session';
/** The header an unsafe request authenticated by the cookie must carry. */
export const CSRF_HEADER = 'x-csrf-token';

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/** Whether a request with this method changes nothing (no CSRF token needed). */
export function isSafeMethod(method: string): boolean {
  return SAFE_METHODS.has(method.toUpperCase());
}

/** The session token in the request's cookie, if any (the __Host- one first). */
export function readSessionCookie(request: FastifyRequest): string | undefined {
  const header = request.headers.cookie;
  if (header === undefined) return undefined;
  let plain: string | undefined;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq < 0) continue;
    const name = part.slice(0, eq).trim();
    const value = part.slice(eq + 1).trim();
    if (name === SECURE_SESSION_COOKIE && value !== '') return value;
    if (name === SESSION_COOKIE && value !== '') plain = value;
  }
  return plain;
}

/** Whether the cookie should be Secure (and __Host-): the request came over TLS or the public URL is https. */
export function secureCookies(request: FastifyRequest, publicUrl: URL): boolean {
  return request.protocol === 'https' || publicUrl.protocol === 'https:';
}

/** The Set-Cookie value that keeps `token` until `expiresAt`. */
export function sessionCookie(token: string, expiresAt: string, secure: boolean): string {
  const maxAge = Math.max(0, Math.floor((Date.parse(expiresAt) - Date.now()) / 1000));
  const name = secure ? SECURE_SESSION_COOKIE : SESSION_COOKIE;
  return `${name}=${token}; Path=/; Max-Age=${maxAge}; HttpOnly; SameSite=Strict${secure ? '; Secure' : ''}`;
}

/** Set-Cookie values that remove both cookies. */
export function clearedSessionCookies(secure: boolean): string[] {
  return [
    `${SESSION_COOKIE}=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict${secure ? '; Secure' : ''}`,
    ...(secure ? [`${SECURE_SESSION_COOKIE}=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict; Secure`] : []),
  ];
}

/**
 * The CSRF token of a session: derived from the session token (which the page's script never sees),
 * so it is valid for that session alone and needs no storage.
 */
export function csrfTokenFor(sessionToken: string): string {
  return createHmac('sha256', sessionToken).update('slipway dashboard csrf v1').digest('base64url');
}

/** Whether `given` is the CSRF token of `sessionToken` (compared in constant time). */
export function csrfTokenMatches(sessionToken: string, given: string | string[] | undefined): boolean {
  if (typeof given !== 'string') return false;
  const expected = Buffer.from(csrfTokenFor(sessionToken));
  const actual = Buffer.from(given);
  return actual.length === expected.length && timingSafeEqual(actual, expected);
}
