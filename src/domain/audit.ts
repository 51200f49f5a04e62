// The audit log (decisions §18): what an entry records, who may read it, and the use-case that lists them.
import crypto from 'node:crypto';
import type { Kysely, Selectable } from 'kysely';
import type { Db } from '../db/database.js';
import type { AuditLogTable, Database } from '../db/schema.js';
import type { Principal } from '../core/principal.js';
import { pageFromRows, type Page, type PageRequest } from '../core/page.js';

/** Who acted: a principal (with the address it called from), or an unauthenticated caller (a login). */
export interface AuditActor {
  readonly userId: string | null;
  /** Known without a read (a login names its e-mail); else read from the user in the same transaction. */
  readonly email?: string | null | undefined;
  /** `session`, the API key's prefix, or `webhook`. */
  readonly via: string;
  readonly ip: string | null;
}

/** What happened to which object. Never a variable's value, a key or a password: names and ids only. */
export interface AuditEvent {
  /** e.g. `deployment.create`, `env.set`, `team.member.add`, `auth.login`. */
  readonly action: string;
  readonly targetType: string;
  readonly targetId: string | null;
  readonly teamId: string | null;
  readonly outcome?: 'success' | 'failure';
}

/** The actor of a principal's request. */
export function actorOf(principal: Principal): AuditActor {
  const via = principal.via === 'api_key' ? (principal.keyPrefix ?? 'api_key') : principal.via;
  return { userId: principal.userId, via, ip: principal.ip ?? null };
}

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

/** Runs `change` and appends its entry in one transaction. */
export async function audited<T>(db: Db, actor: AuditActor, event: AuditEvent | ((result: T) => AuditEvent), change: (trx: Kysely<Database>) => Promise<T>): Promise<T> {
  return db.transaction().execute(async (trx) => {
    const result = await change(trx);
    await appendAudit(trx, actor, typeof event === 'function' ? event(result) : event);
    return result;
  });
}

export interface AuditEntryView {
  id: string;
  at: string;
  actor_id: string | null;
  actor_email: string | null;
  via: string;
  action: string;
  target_type: string;
  target_id: string | null;
  team_id: string | null;
  ip: string | null;
  outcome: 'success' | 'failure';
}

/** A position in the audit log: the entry's sequence number. */
export type AuditPosition = readonly [seq: number];

/**
 * A page of the entries the caller may read, newest first: their own, those of the teams they own,
 * or (an administrator) all; narrowed by `teamId` and `targetId` when given.
 */
export async function listAudit(
  db: Db,
  principal: Principal,
  filter: { teamId?: string | undefined; targetId?: string | undefined },
  page: PageRequest<AuditPosition>,
): Promise<Page<AuditEntryView, AuditPosition>> {
  let query = db.selectFrom('audit_log').selectAll();
  if (!principal.isAdmin) {
    const owned = [...(principal.teams ?? new Map<string, string>())].filter(([, role]) => role === 'owner').map(([id]) => id);
    query = query.where((eb) => (owned.length === 0 ? eb('actor_id', '=', principal.userId) : eb.or([eb('actor_id', '=', principal.userId), eb('team_id', 'in', owned)])));
  }
  if (filter.teamId !== undefined) query = query.where('team_id', '=', filter.teamId);
  if (filter.targetId !== undefined) query = query.where('target_id', '=', filter.targetId);
  if (page.after !== undefined) query = query.where('seq', '<', page.after[0]);
  const rows = await query.orderBy('seq', 'desc').limit(page.limit + 1).execute();
  const result = pageFromRows(rows, page.limit, (row) => [row.seq] as const);
  return { items: result.items.map(presentEntry), next: result.next };
}

const presentEntry = (row: Selectable<AuditLogTable>): AuditEntryView => ({
  id: row.id,
  at: row.at,
  actor_id: row.actor_id,
  actor_email: row.actor_email,
  via: row.via,
  action: row.action,
  target_type: row.target_type,
  target_id: row.target_id,
  team_id: row.team_id,
  ip: row.ip,
  outcome: row.outcome,
});

/** Drops entries older than `days` (SLIPWAY_AUDIT_RETENTION_DAYS); returns how many. */
export async function pruneAudit(db: Db, days: number, now = Date.now()): Promise<number> {
  const cutoff = new Date(now - days * 86_400_000).toISOString();
  const result = await db.deleteFrom('audit_log').where('at', '<', cutoff).executeTakeFirst();
  return Number(result.numDeletedRows);
}

/** An entry a store appends in the transaction of the write it is handed with. */
export interface AuditRecord {
  readonly actor: AuditActor;
  readonly event: AuditEvent;
}

/** Appends `record` (when given) inside `trx`. */
export async function appendRecord(trx: Kysely<Database>, record: AuditRecord | undefined): Promise<void> {
  if (record !== undefined) await appendAudit(trx, record.actor, record.event);
}

/** The record of `action` on a deployment by the principal (named by id; never a value, key or password). */
export function deploymentRecord(principal: Principal, deployment: { id: string; team_id: string | null }, action: string, targetType = 'deployment', targetId?: string): AuditRecord {
  return { actor: actorOf(principal), event: { action, targetType, targetId: targetId ?? deployment.id, teamId: deployment.team_id } };
}
