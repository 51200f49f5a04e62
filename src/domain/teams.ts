// Team use-cases (decisions §18): teams, their members and roles; every access decided by the policy.
import crypto from 'node:crypto';
import type { Kysely } from 'kysely';
import type { Db } from '../db/database.js';
import { isUniqueViolation, nowIso } from '../db/database.js';
import type { Database } from '../db/schema.js';
import { bumpListVersion, teamDeploymentCount } from '../db/deployment-store.js';
import { DomainError } from '../core/errors.js';
import { TEAM_ROLES, type Principal, type TeamRole } from '../core/principal.js';
import { authorizeTeam } from './policy.js';
import { actorOf, type AuditEvent } from './audit.js';
import { appendAudit } from '../db/audit-log.js';
import { assertUuid } from './deployments.js';

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

/** Creates a team; the creator is its owner. */
export async function createTeam(db: Db, principal: Principal, input: { name: string }): Promise<TeamView> {
  const name = checkName(input.name);
  const id = crypto.randomUUID();
  const now = nowIso();
  await db.transaction().execute(async (trx) => {
    await trx.insertInto('teams').values({ id, name, created_at: now, updated_at: now }).execute();
    await trx.insertInto('team_members').values({ team_id: id, user_id: principal.userId, role: 'owner', created_at: now }).execute();
    await appendAudit(trx, actorOf(principal), teamEvent('team.create', id));
  });
  return { id, name, created_at: now, role: 'owner' };
}

/** The teams the caller belongs to, oldest first, with their role in each. */
export async function listTeams(db: Db, principal: Principal): Promise<TeamView[]> {
  const rows = await db
    .selectFrom('team_members')
    .innerJoin('teams', 'teams.id', 'team_members.team_id')
    .select(['teams.id', 'teams.name', 'teams.created_at', 'team_members.role'])
    .where('team_members.user_id', '=', principal.userId)
    .orderBy('teams.seq')
    .execute();
  return rows.map((r) => ({ id: r.id, name: r.name, created_at: r.created_at, role: r.role }));
}

/** The team's row, read once the policy let the caller see it (`needed` role at least). */
async function teamFor(db: Kysely<Database>, principal: Principal, id: string, needed: TeamRole): Promise<TeamView> {
  assertUuid(id, 'team');
  const role = authorizeTeam(principal, id, needed);
  const row = await db.selectFrom('teams').select(['id', 'name', 'created_at']).where('id', '=', id).executeTakeFirst();
  if (row === undefined) throw new DomainError('not_found', 'team not found');
  return { ...row, role };
}

export async function getTeam(db: Db, principal: Principal, id: string): Promise<TeamView> {
  return teamFor(db, principal, id, 'viewer');
}

/** Renames a team (owners). */
export async function updateTeam(db: Db, principal: Principal, id: string, input: { name?: string | undefined }): Promise<TeamView> {
  const team = await teamFor(db, principal, id, 'owner');
  if (input.name === undefined) throw invalid('nothing to change: send name');
  const name = checkName(input.name);
  await db.transaction().execute(async (trx) => {
    await trx.updateTable('teams').set({ name, updated_at: nowIso() }).where('id', '=', id).execute();
    await appendAudit(trx, actorOf(principal), teamEvent('team.update', id));
  });
  return { ...team, name };
}

/** Deletes a team (owners), only when it holds no deployment. */
export async function deleteTeam(db: Db, principal: Principal, id: string): Promise<void> {
  await teamFor(db, principal, id, 'owner');
  await db.transaction().execute(async (trx) => {
    await lockTeam(trx, id);
    const held = await teamDeploymentCount(trx, id);
    if (held > 0) throw invalid(`the team still holds ${held} deployment${held === 1 ? '' : 's'}: delete them before deleting the team`);
    await trx.deleteFrom('team_members').where('team_id', '=', id).execute();
    await trx.deleteFrom('teams').where('id', '=', id).execute();
    await appendAudit(trx, actorOf(principal), teamEvent('team.delete', id));
  });
}

/** Takes the team's row lock for the rest of `trx`: member changes of one team happen one after the other. */
async function lockTeam(trx: Kysely<Database>, id: string): Promise<void> {
  const touched = await trx.updateTable('teams').set({ id }).where('id', '=', id).executeTakeFirst();
  if (touched.numUpdatedRows === 0n) throw new DomainError('not_found', 'team not found');
}

/** The team's members, oldest first (any member may see them). */
export async function listMembers(db: Db, principal: Principal, teamId: string): Promise<MemberView[]> {
  await teamFor(db, principal, teamId, 'viewer');
  return memberRows(db, teamId);
}

async function memberRows(db: Kysely<Database>, teamId: string, userId?: string): Promise<MemberView[]> {
  let query = db
    .selectFrom('team_members')
    .innerJoin('users', 'users.id', 'team_members.user_id')
    .select(['team_members.user_id', 'users.email', 'team_members.role', 'team_members.created_at'])
    .where('team_members.team_id', '=', teamId);
  if (userId !== undefined) query = query.where('team_members.user_id', '=', userId);
  return query.orderBy('team_members.created_at').orderBy('team_members.user_id').execute();
}

/** Adds a user (by e-mail) to a team with a role (owners). */
export async function addMember(db: Db, principal: Principal, teamId: string, input: { email: string; role: string }): Promise<MemberView> {
  await teamFor(db, principal, teamId, 'owner');
  const role = checkRole(input.role);
  const email = input.email.trim().toLowerCase();
  const user = await db.selectFrom('users').select(['id', 'email']).where('email', '=', email).executeTakeFirst();
  if (user === undefined) throw invalid(`no user has the e-mail "${email.slice(0, 254)}" (an administrator creates users first)`);
  const now = nowIso();
  try {
    await db.transaction().execute(async (trx) => {
      await lockTeam(trx, teamId);
      await bumpListVersion(trx, { userId: user.id });
      await trx.insertInto('team_members').values({ team_id: teamId, user_id: user.id, role, created_at: now }).execute();
      await appendAudit(trx, actorOf(principal), teamEvent('team.member.add', teamId, { type: 'user', id: user.id }));
    });
  } catch (err) {
    if (isUniqueViolation(err)) throw invalid(`${user.email} is already a member of this team`);
    throw err;
  }
  return { user_id: user.id, email: user.email, role, created_at: now };
}

/** The member, or 404 when the user is not in the team. */
async function memberOf(trx: Kysely<Database>, teamId: string, userId: string): Promise<MemberView> {
  assertUuid(userId, 'member');
  const member = (await memberRows(trx, teamId, userId))[0];
  if (member === undefined) throw new DomainError('not_found', 'member not found');
  return member;
}

/** Refuses a change that would leave the team without an owner. */
async function keepAnOwner(trx: Kysely<Database>, teamId: string, member: MemberView, what: string): Promise<void> {
  if (member.role !== 'owner') return;
  const owners = await trx.selectFrom('team_members').select('user_id').where('team_id', '=', teamId).where('role', '=', 'owner').execute();
  if (owners.length <= 1) throw invalid(`${member.email} is the team's last owner: ${what} would leave the team without one (make another member owner first)`);
}

/** Changes a member's role (owners); the team keeps at least one owner. */
export async function changeMemberRole(db: Db, principal: Principal, teamId: string, userId: string, input: { role: string }): Promise<MemberView> {
  await teamFor(db, principal, teamId, 'owner');
  const role = checkRole(input.role);
  return db.transaction().execute(async (trx) => {
    await lockTeam(trx, teamId);
    const member = await memberOf(trx, teamId, userId);
    if (role !== 'owner') await keepAnOwner(trx, teamId, member, `making them ${role}`);
    await trx.updateTable('team_members').set({ role }).where('team_id', '=', teamId).where('user_id', '=', userId).execute();
    await appendAudit(trx, actorOf(principal), teamEvent('team.member.role', teamId, { type: 'user', id: userId }));
    return { ...member, role };
  });
}

/** Removes a member (owners; any member may leave); the team keeps at least one owner. */
export async function removeMember(db: Db, principal: Principal, teamId: string, userId: string): Promise<void> {
  await teamFor(db, principal, teamId, userId === principal.userId ? 'viewer' : 'owner');
  await db.transaction().execute(async (trx) => {
    await lockTeam(trx, teamId);
    const member = await memberOf(trx, teamId, userId);
    await keepAnOwner(trx, teamId, member, 'removing them');
    await bumpListVersion(trx, { userId });
    await trx.deleteFrom('team_members').where('team_id', '=', teamId).where('user_id', '=', userId).execute();
    await appendAudit(trx, actorOf(principal), teamEvent('team.member.remove', teamId, { type: 'user', id: userId }));
  });
}
