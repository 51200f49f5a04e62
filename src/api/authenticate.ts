// The one authentication hook of the API: a bearer session token or API key becomes `request.principal`.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Db } from '../db/database.js';
import { authenticateBearer } from '../domain/accounts.js';
import type { KeyUsage } from '../domain/key-usage.js';
import { DomainError } from '../core/errors.js';
import type { Principal } from '../core/principal.js';
import { bearerToken } from '../core/credentials.js';

declare module 'fastify' {
  interface FastifyRequest {
    principal: Principal | null;
  }
}

/** Adds the authentication hook to a scope: every route in it needs a valid credential. */
export function registerAuthentication(scope: FastifyInstance, db: Db, keyUsage: KeyUsage): void {
  scope.decorateRequest('principal', null);
  scope.addHook('onRequest', async (request) => {
    const principal = await authenticateBearer(db, keyUsage, bearerToken(request.headers.authorization));
    request.principal = { ...principal, ip: request.ip };
  });
}

/** The authenticated caller (the hook guarantees one inside the authenticated scope). */
export function principalOf(request: FastifyRequest): Principal {
  if (request.principal === null) throw new DomainError('unauthorized', 'missing or invalid credentials');
  return request.principal;
}
