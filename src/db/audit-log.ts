// The audit log on the database: entries appended inside the transaction of the change they record, read a page at a time, pruned by age.
import crypto from 'node:crypto';
import type { Kysely } from 'kysely';
import type { AuditActor, AuditEvent, AuditLog, AuditRecord } from '../domain/audit.js';
import type { Db } from './database.js';
import type { Database } from './schema.js';

/**
 * Appends one entry inside `trx`, the transaction of the change it records: the change and its
 * entry commit together or not at all. The table is only ever appended to (and pruned by age).
 */
export async function appendAudit(trx: Kysely<Database>, actor: AuditActor, event: AuditEvent): Promise<void> {
  let email = actor.email ?? null;
  if (actor.email === undefined && actor.userId !== null) {
    email = (await trx.selectFrom('users').select('email').where('id', '=', actor.userId).executeTakeFirst())?.email ?? null;
  }
  await trx
    .insertInto('audit_log')
    .values({
      id: crypto.randomUUID(),
      at: new Date().toISOString(),
      actor_id: actor.userId,
      actor_email: email,
      via: actor.via,
      action: event.action,
      target_type: event.targetType,
      target_id: event.targetId,
      team_id: event.teamId,
      ip: actor.ip,
      outcome: event.outcome ?? 'success',
    })
    .execute();
}

/** Appends `record` (when given) inside `trx`. */
export async function appendRecord(trx: Kysely<Database>, record: AuditRecord | undefined): Promise<void> {
  if (record !== undefined) await appendAudit(trx, record.actor, record.event);
}

/** AuditLog over the `audit_log` table. */
export function databaseAuditLog(db: Db): AuditLog {
  return {
    async page(readableBy, filter, before, limit) {
      let query = db.selectFrom('audit_log').selectAll();
      if (readableBy !== undefined) {
        const { actorId, teamIds } = readableBy;
        query = query.where((eb) => (teamIds.length === 0 ? eb('actor_id', '=', actorId) : eb.or([eb('actor_id', '=', actorId), eb('team_id', 'in', teamIds)])));
      }
      if (filter.teamId !== undefined) query = query.where('team_id', '=', filter.teamId);
      if (filter.targetId !== undefined) query = query.where('target_id', '=', filter.targetId);
      if (before !== undefined) query = query.where('seq', '<', before);
      return query.orderBy('seq', 'desc').limit(limit).execute();
    },
  };
}

/** Drops entries older than `days` (SLIPWAY_AUDIT_RETENTION_DAYS); returns how many. */
export async function pruneAudit(db: Db, days: number, now = Date.now()): Promise<number> {
  const cutoff = new Date(now - days * 86_400_000).toISOString();
  const result = await db.deleteFrom('audit_log').where('at', '<', cutoff).executeTakeFirst();
  return Number(result.numDeletedRows);
}
