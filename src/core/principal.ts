// The authenticated caller of a request, and the one ownership policy every use-case applies.
import { DomainError } from './errors.js';

/** Who is calling, and with which credential. */
export interface Principal {
  readonly userId: string;
  readonly isAdmin: boolean;
  /** `webhook`: a verified delivery acting for the deployment's owner (deploy on push only). */
  readonly via: 'session' | 'api_key' | 'webhook';
  /** Set when via is 'session'. */
  readonly sessionId: string | undefined;
  /** Set when via is 'api_key'. */
  readonly apiKeyId: string | undefined;
}

/**
 * Ownership policy: returns the object when the principal owns it; otherwise throws the same
 * 404 as for a missing object, so another user's objects cannot even be detected.
 */
export function authorizeOwned<T extends { user_id: string }>(principal: Principal, object: T | undefined, what: string): T {
  if (object === undefined || object.user_id !== principal.userId) {
    throw new DomainError('not_found', `${what} not found`);
  }
  return object;
}

/** Admin-only actions. */
export function authorizeAdmin(principal: Principal): void {
  if (!principal.isAdmin) throw new DomainError('forbidden', 'only an administrator can do this');
}
