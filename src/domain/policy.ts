// The authorization policy every use-case applies: who may see and change which object.
import { DomainError } from '../core/errors.js';
import type { Principal } from '../core/principal.js';

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
