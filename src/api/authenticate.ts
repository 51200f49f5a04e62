// The one authentication hook of the API: a bearer session token or API key (or the dashboard's session cookie, with its CSRF token for changes) becomes `request.principal`.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { authenticateBearer } from '../domain/accounts.js';
import type { AccountStore } from '../domain/account-store.js';
import type { KeyUsage } from '../domain/key-usage.js';
import { DomainError } from '../core/errors.js';
import type { Principal } from '../core/principal.js';
import { bearerToken } from '../core/credentials.js';
import { CSRF_HEADER, csrfTokenMatches, isSafeMethod, readSessionCookie } from './session-cookie.js';

declare module 'fastify' {
  interface FastifyRequest {
    principal: Principal | null;
  }
}

/** Adds the authentication hook to a scope: every route in it needs a valid credential. */
export function registerAuthentication(scope: FastifyInstance, accounts: AccountStore, keyUsage: KeyUsage): void {
  scope.decorateRequest('principal', null);
  scope.addHook('onRequest', async (request) => {
    // A bearer credential, when given, decides alone (the API as before); the cookie is the dashboard's.
    const cookie = request.headers.authorization === undefined ? readSessionCookie(request) : undefined;
    if (cookie === undefined) {
      const principal = await authenticateBearer(accounts, keyUsage, bearerToken(request.headers.authorization));
      request.principal = { ...principal, ip: request.ip };
      return;
    }
    const principal = await authenticateBearer(accounts, keyUsage, cookie);
    // Only a session lives in the cookie; an API key placed there is refused like any bad credential.
    if (principal.via !== 'session') throw new DomainError('unauthorized', 'missing or invalid credentials');
    // Another site (an app on a sibling subdomain is "same site") can make the browser send the
    // cookie, but cannot read the CSRF token, which only this origin's pages are given.
    if (!isSafeMethod(request.method) && !csrfTokenMatches(cookie, request.headers[CSRF_HEADER])) {
      throw new DomainError('forbidden', 'this change needs the dashboard\'s CSRF token (X-CSRF-Token): reload the page and try again');
    }
    request.principal = { ...principal, ip: request.ip };
  });
}

/** The authenticated caller (the hook guarantees one inside the authenticated scope). */
export function principalOf(request: FastifyRequest): Principal {
  if (request.principal === null) throw new DomainError('unauthorized', 'missing or invalid credentials');
  return request.principal;
}
