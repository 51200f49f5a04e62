// Reading one database as a principal may: the policy's answer (outsiders get not_found, as for a missing one).
import { DomainError } from '../core/errors.js';
import type { Principal } from '../core/principal.js';
import { assertUuid } from '../domain/deployments.js';
import { authorizeDeployment, type DeploymentAction } from '../domain/policy.js';
import type { DatabasesContext } from './database-context.js';
import type { DatabaseRow } from './database-store.js';

/**
 * A database the caller may `action` (the deployment policy, applied to databases): missing, not a
 * UUID, another user's or a team's the caller is not in → 404; a member below the role → 403.
 */
export async function getDatabaseRow(ctx: Pick<DatabasesContext, 'store'>, principal: Principal, id: string, action: DeploymentAction): Promise<DatabaseRow> {
  try {
    assertUuid(id, 'database');
  } catch {
    throw new DomainError('not_found', 'database not found');
  }
  return authorizeDeployment(principal, await ctx.store.get(id), action, 'database');
}
