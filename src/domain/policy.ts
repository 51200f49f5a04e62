// The authorization policy every use-case applies: who may see and change which object, from (user, role, object).
import { DomainError } from '../core/errors.js';
import { TEAM_ROLES, type Principal, type TeamRole } from '../core/principal.js';

/**
 * What a use-case does to a deployment (decisions §18): `read` its deployment, builds, logs,
 * metrics and non-secret variables (viewer); `change` it — deploy, stop, restart, roll back,
 * cancel, upload, settings, variables, domains, webhooks, previews (developer); `manage` it —
 * create or delete (owner).
 */
export type DeploymentAction = 'read' | 'change' | 'manage';

/** The least role a team member needs for each action. */
const ROLE_FOR: Record<DeploymentAction, TeamRole> = { read: 'viewer', change: 'developer', manage: 'owner' };

const rank = (role: TeamRole): number => TEAM_ROLES.indexOf(role);

/** Whether `role` is at least `needed`. */
export const roleAtLeast = (role: TeamRole, needed: TeamRole): boolean => rank(role) >= rank(needed);

/** The principal's role in a team, or undefined when they are not a member. */
export const roleIn = (principal: Principal, teamId: string): TeamRole | undefined => principal.teams?.get(teamId);

const notFound = (what: string): DomainError => new DomainError('not_found', `${what} not found`);

/**
 * Ownership policy for objects that belong to one user (API keys, a user's own deployments):
 * returns the object when the principal owns it; otherwise throws the same 404 as for a missing
 * object, so another user's objects cannot even be detected.
 */
export function authorizeOwned<T extends { user_id: string }>(principal: Principal, object: T | undefined, what: string): T {
  if (object === undefined || object.user_id !== principal.userId) throw notFound(what);
  return object;
}

/**
 * The deployment policy: a deployment without a team is its creator's alone (anyone else: 404);
 * a team's deployment is seen by its members only (anyone else: 404, exactly as a missing one),
 * and a member whose role is below the action's gets 403 `forbidden`.
 */
export function authorizeDeployment<T extends { user_id: string; team_id: string | null }>(
  principal: Principal,
  object: T | undefined,
  action: DeploymentAction,
  what = 'deployment',
): T {
  if (object === undefined) throw notFound(what);
  if (object.team_id === null) return authorizeOwned(principal, object, what);
  authorizeTeam(principal, object.team_id, ROLE_FOR[action], what);
  return object;
}

/**
 * The team policy: an outsider gets 404 (the team might as well not exist); a member below
 * `needed` gets 403 `forbidden`. Returns the member's role.
 */
export function authorizeTeam(principal: Principal, teamId: string, needed: TeamRole, what = 'team'): TeamRole {
  const role = roleIn(principal, teamId);
  if (role === undefined) throw notFound(what);
  if (!roleAtLeast(role, needed)) throw new DomainError('forbidden', `this needs the ${needed} role in the team (you are a ${role})`);
  return role;
}

/** Admin-only actions. */
export function authorizeAdmin(principal: Principal): void {
  if (!principal.isAdmin) throw new DomainError('forbidden', 'only an administrator can do this');
}

/** Who may read an audit entry: its actor, an owner of its team, or an administrator. */
export function mayReadAuditEntry(principal: Principal, entry: { actor_id: string | null; team_id: string | null }): boolean {
  if (principal.isAdmin || entry.actor_id === principal.userId) return true;
  return entry.team_id !== null && roleIn(principal, entry.team_id) === 'owner';
}
