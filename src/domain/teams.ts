// Team use-cases (decisions §18): teams, their members and roles; every access decided by the policy.
import crypto from 'node:crypto';
import { nowIso } from '../core/now.js';
import { DomainError } from '../core/errors.js';
import { TEAM_ROLES, type Principal, type TeamRole } from '../core/principal.js';
import { authorizeTeam } from './policy.js';
import { actorOf, type AuditEvent, type AuditRecord } from './audit.js';
import { assertUuid } from './deployments.js';

/** A team's record. */
export interface TeamRow {
  id: string;
  name: string;
  created_at: string;
}

/**
 * Teams and their members; implemented over the database in src/db/team-store.ts. Every write
 * appends its audit record in its own transaction; member changes of one team take the team's
 * lock first, so they happen one after the other (and fail with `team_gone` once it is deleted).
 */
export interface TeamStore {
  /** Records the team with `ownerId` as its owner. */
  create(team: TeamRow, ownerId: string, audit: AuditRecord): Promise<void>;
  /** The teams `userId` belongs to, oldest first, with their role in each. */
  listFor(userId: string): Promise<Array<TeamRow & { role: TeamRole }>>;
  get(id: string): Promise<TeamRow | undefined>;
  rename(id: string, name: string, audit: AuditRecord): Promise<void>;
  /** Deletes the team and its memberships, unless it holds deployments (their count, nothing changed). */
  remove(id: string, audit: AuditRecord): Promise<'removed' | 'team_gone' | { held: number; databases?: number }>;
  /** The team's members (or the one member `userId`), oldest first. */
  members(teamId: string, userId?: string): Promise<MemberView[]>;
  /** A user by (normalized) e-mail. */
  userByEmail(email: string): Promise<{ id: string; email: string } | undefined>;
  /** Adds a member (their deployment list changes); `already` when they are one. */
  addMember(teamId: string, member: { user_id: string; role: TeamRole; created_at: string }, audit: AuditRecord): Promise<'added' | 'already' | 'team_gone'>;
  /**
   * Sets a member's role, or (`role` undefined) removes them, under the team's lock; `check` sees the
   * member and the team's number of owners first and may throw to refuse. Returns the member as they were.
   */
  changeMember(
    teamId: string,
    userId: string,
    role: TeamRole | undefined,
    check: (member: MemberView, owners: number) => void,
    audit: AuditRecord,
  ): Promise<MemberView | 'no_member' | 'team_gone'>;
}

export interface TeamView {
  id: string;
  name: string;
  created_at: string;
  /** The caller's role in the team. */
  role: TeamRole;
}

export interface MemberView {
  user_id: string;
  email: string;
  role: TeamRole;
  created_at: string;
}

const invalid = (message: string): DomainError => new DomainError('validation_error', message);

function checkName(value: string): string {
  const name = value.trim();
  if (name.length < 1 || name.length > 100) throw invalid('name must be 1 to 100 characters');
  return name;
}

function checkRole(value: string): TeamRole {
  if (!(TEAM_ROLES as readonly string[]).includes(value)) {
    throw invalid(`unknown role "${value.slice(0, 40)}": role must be one of ${TEAM_ROLES.join(', ')}`);
  }
  return value as TeamRole;
}

const teamEvent = (action: string, teamId: string, target?: { type: string; id: string }): AuditEvent => ({
  action,
  targetType: target?.type ?? 'team',
  targetId: target?.id ?? teamId,
  teamId,
});

const teamRecord = (principal: Principal, action: string, teamId: string, target?: { type: string; id: string }): AuditRecord => ({
  actor: actorOf(principal),
  event: teamEvent(action, teamId, target),
});

const teamGone = (): DomainError => new DomainError('not_found', 'team not found');
const memberGone = (): DomainError => new DomainError('not_found', 'member not found');

/** Creates a team; the creator is its owner. */
export async function createTeam(teams: TeamStore, principal: Principal, input: { name: string }): Promise<TeamView> {
  const name = checkName(input.name);
  const id = crypto.randomUUID();
  const now = nowIso();
  await teams.create({ id, name, created_at: now }, principal.userId, teamRecord(principal, 'team.create', id));
  return { id, name, created_at: now, role: 'owner' };
}

/** The teams the caller belongs to, oldest first, with their role in each. */
export async function listTeams(teams: TeamStore, principal: Principal): Promise<TeamView[]> {
  const rows = await teams.listFor(principal.userId);
  return rows.map((r) => ({ id: r.id, name: r.name, created_at: r.created_at, role: r.role }));
}

/** The team's row, read once the policy let the caller see it (`needed` role at least). */
async function teamFor(teams: TeamStore, principal: Principal, id: string, needed: TeamRole): Promise<TeamView> {
  assertUuid(id, 'team');
  const role = authorizeTeam(principal, id, needed);
  const row = await teams.get(id);
  if (row === undefined) throw teamGone();
  return { id: row.id, name: row.name, created_at: row.created_at, role };
}

export async function getTeam(teams: TeamStore, principal: Principal, id: string): Promise<TeamView> {
  return teamFor(teams, principal, id, 'viewer');
}

/** Renames a team (owners). */
export async function updateTeam(teams: TeamStore, principal: Principal, id: string, input: { name?: string | undefined }): Promise<TeamView> {
  const team = await teamFor(teams, principal, id, 'owner');
  if (input.name === undefined) throw invalid('nothing to change: send name');
  const name = checkName(input.name);
  await teams.rename(id, name, teamRecord(principal, 'team.update', id));
  return { ...team, name };
}

/** Deletes a team (owners), only when it holds no deployment. */
export async function deleteTeam(teams: TeamStore, principal: Principal, id: string): Promise<void> {
  await teamFor(teams, principal, id, 'owner');
  const removed = await teams.remove(id, teamRecord(principal, 'team.delete', id));
  if (removed === 'team_gone') throw teamGone();
  if (removed !== 'removed') {
    const { held, databases } = removed;
    if (databases !== undefined) throw invalid(`the team still holds ${databases} database${databases === 1 ? '' : 's'}: delete them before deleting the team`);
    throw invalid(`the team still holds ${held} deployment${held === 1 ? '' : 's'}: delete them before deleting the team`);
  }
}

/** The team's members, oldest first (any member may see them). */
export async function listMembers(teams: TeamStore, principal: Principal, teamId: string): Promise<MemberView[]> {
  await teamFor(teams, principal, teamId, 'viewer');
  return teams.members(teamId);
}

/** Adds a user (by e-mail) to a team with a role (owners). */
export async function addMember(teams: TeamStore, principal: Principal, teamId: string, input: { email: string; role: string }): Promise<MemberView> {
  await teamFor(teams, principal, teamId, 'owner');
  const role = checkRole(input.role);
  const email = input.email.trim().toLowerCase();
  const user = await teams.userByEmail(email);
  if (user === undefined) throw invalid(`no user has the e-mail "${email.slice(0, 254)}" (an administrator creates users first)`);
  const now = nowIso();
  const added = await teams.addMember(teamId, { user_id: user.id, role, created_at: now }, teamRecord(principal, 'team.member.add', teamId, { type: 'user', id: user.id }));
  if (added === 'team_gone') throw teamGone();
  if (added === 'already') throw invalid(`${user.email} is already a member of this team`);
  return { user_id: user.id, email: user.email, role, created_at: now };
}

/** Refuses a change that would leave the team without an owner. */
const keepAnOwner = (what: string) => (member: MemberView, owners: number): void => {
  if (member.role === 'owner' && owners <= 1) {
    throw invalid(`${member.email} is the team's last owner: ${what} would leave the team without one (make another member owner first)`);
  }
};

/** Changes a member's role (owners); the team keeps at least one owner. */
export async function changeMemberRole(teams: TeamStore, principal: Principal, teamId: string, userId: string, input: { role: string }): Promise<MemberView> {
  await teamFor(teams, principal, teamId, 'owner');
  const role = checkRole(input.role);
  assertUuid(userId, 'member');
  const check = role === 'owner' ? () => undefined : keepAnOwner(`making them ${role}`);
  const member = await teams.changeMember(teamId, userId, role, check, teamRecord(principal, 'team.member.role', teamId, { type: 'user', id: userId }));
  if (member === 'team_gone') throw teamGone();
  if (member === 'no_member') throw memberGone();
  return { ...member, role };
}

/** Removes a member (owners; any member may leave); the team keeps at least one owner. */
export async function removeMember(teams: TeamStore, principal: Principal, teamId: string, userId: string): Promise<void> {
  await teamFor(teams, principal, teamId, userId === principal.userId ? 'viewer' : 'owner');
  assertUuid(userId, 'member');
  const member = await teams.changeMember(teamId, userId, undefined, keepAnOwner('removing them'), teamRecord(principal, 'team.member.remove', teamId, { type: 'user', id: userId }));
  if (member === 'team_gone') throw teamGone();
  if (member === 'no_member') throw memberGone();
}
