// The team store on the database: the only place that queries `teams` and `team_members` for the team use-cases.
import type { Kysely } from 'kysely';
import type { MemberView, TeamStore } from '../domain/teams.js';
import { isUniqueViolation, nowIso, type Db } from './database.js';
import type { Database } from './schema.js';
import { appendRecord } from './audit-log.js';
import { bumpListVersion, teamDeploymentCount } from './deployment-store.js';

/** Takes the team's row lock for the rest of `trx`: member changes of one team happen one after the other. False if the team is gone. */
async function lockTeam(trx: Kysely<Database>, id: string): Promise<boolean> {
  const touched = await trx.updateTable('teams').set({ id }).where('id', '=', id).executeTakeFirst();
  return touched.numUpdatedRows > 0n;
}

function memberRows(db: Kysely<Database>, teamId: string, userId?: string): Promise<MemberView[]> {
  let query = db
    .selectFrom('team_members')
    .innerJoin('users', 'users.id', 'team_members.user_id')
    .select(['team_members.user_id', 'users.email', 'team_members.role', 'team_members.created_at'])
    .where('team_members.team_id', '=', teamId);
  if (userId !== undefined) query = query.where('team_members.user_id', '=', userId);
  return query.orderBy('team_members.created_at').orderBy('team_members.user_id').execute();
}

/** TeamStore over the `teams` and `team_members` tables. */
export function databaseTeamStore(db: Db): TeamStore {
  return {
    async create(team, ownerId, audit) {
      await db.transaction().execute(async (trx) => {
        await trx.insertInto('teams').values({ ...team, updated_at: team.created_at }).execute();
        await trx.insertInto('team_members').values({ team_id: team.id, user_id: ownerId, role: 'owner', created_at: team.created_at }).execute();
        await appendRecord(trx, audit);
      });
    },

    listFor: (userId) =>
      db
        .selectFrom('team_members')
        .innerJoin('teams', 'teams.id', 'team_members.team_id')
        .select(['teams.id', 'teams.name', 'teams.created_at', 'team_members.role'])
        .where('team_members.user_id', '=', userId)
        .orderBy('teams.seq')
        .execute(),

    get: (id) => db.selectFrom('teams').select(['id', 'name', 'created_at']).where('id', '=', id).executeTakeFirst(),

    async rename(id, name, audit) {
      await db.transaction().execute(async (trx) => {
        await trx.updateTable('teams').set({ name, updated_at: nowIso() }).where('id', '=', id).execute();
        await appendRecord(trx, audit);
      });
    },

    remove: (id, audit) =>
      db.transaction().execute(async (trx) => {
        if (!(await lockTeam(trx, id))) return 'team_gone' as const;
        const held = await teamDeploymentCount(trx, id);
        if (held > 0) return { held };
        // A team's databases hold its id too: the team goes only once they are deleted.
        const databases = await trx.selectFrom('managed_databases').select((eb) => eb.fn.countAll<number>().as('n')).where('team_id', '=', id).executeTakeFirstOrThrow();
        if (Number(databases.n) > 0) return { held: 0, databases: Number(databases.n) };
        await trx.deleteFrom('team_members').where('team_id', '=', id).execute();
        await trx.deleteFrom('teams').where('id', '=', id).execute();
        await appendRecord(trx, audit);
        return 'removed' as const;
      }),

    members: (teamId, userId) => memberRows(db, teamId, userId),

    userByEmail: (email) => db.selectFrom('users').select(['id', 'email']).where('email', '=', email).executeTakeFirst(),

    async addMember(teamId, member, audit) {
      try {
        return await db.transaction().execute(async (trx) => {
          if (!(await lockTeam(trx, teamId))) return 'team_gone' as const;
          await bumpListVersion(trx, { userId: member.user_id });
          await trx.insertInto('team_members').values({ team_id: teamId, ...member }).execute();
          await appendRecord(trx, audit);
          return 'added' as const;
        });
      } catch (err) {
        if (isUniqueViolation(err)) return 'already';
        throw err;
      }
    },

    changeMember: (teamId, userId, role, check, audit) =>
      db.transaction().execute(async (trx) => {
        if (!(await lockTeam(trx, teamId))) return 'team_gone' as const;
        const member = (await memberRows(trx, teamId, userId))[0];
        if (member === undefined) return 'no_member' as const;
        const owners = await trx.selectFrom('team_members').select('user_id').where('team_id', '=', teamId).where('role', '=', 'owner').execute();
        check(member, owners.length);
        if (role === undefined) {
          await bumpListVersion(trx, { userId });
          await trx.deleteFrom('team_members').where('team_id', '=', teamId).where('user_id', '=', userId).execute();
        } else {
          await trx.updateTable('team_members').set({ role }).where('team_id', '=', teamId).where('user_id', '=', userId).execute();
        }
        await appendRecord(trx, audit);
        return member;
      }),
  };
}
