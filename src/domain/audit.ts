// The audit log (decisions §18): what an entry records, who may read it, and the use-case that lists them.
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

/** The audit log's reads; its entries are appended by the stores, in the transaction of the write (src/db/audit-log.ts). */
export interface AuditLog {
  /**
   * Up to `limit` entries before position `before` (all when undefined), newest first: those whose
   * actor is `readableBy.actorId` or whose team is in `readableBy.teamIds` (every entry when
   * `readableBy` is undefined), narrowed by `teamId` and `targetId` when given.
   */
  page(
    readableBy: { actorId: string; teamIds: readonly string[] } | undefined,
    filter: { teamId?: string | undefined; targetId?: string | undefined },
    before: number | undefined,
    limit: number,
  ): Promise<Array<AuditEntryView & { seq: number }>>;
}

/**
 * A page of the entries the caller may read, newest first: their own, those of the teams they own,
 * or (an administrator) all; narrowed by `teamId` and `targetId` when given.
 */
export async function listAudit(
  log: AuditLog,
  principal: Principal,
  filter: { teamId?: string | undefined; targetId?: string | undefined },
  page: PageRequest<AuditPosition>,
): Promise<Page<AuditEntryView, AuditPosition>> {
  const owned = [...(principal.teams ?? new Map<string, string>())].filter(([, role]) => role === 'owner').map(([id]) => id);
  const readableBy = principal.isAdmin ? undefined : { actorId: principal.userId, teamIds: owned };
  const rows = await log.page(readableBy, filter, page.after?.[0], page.limit + 1);
  const result = pageFromRows(rows, page.limit, (row) => [row.seq] as const);
  return { items: result.items.map(presentEntry), next: result.next };
}

/** An entry a store appends in the transaction of the write it is handed with. */
export interface AuditRecord {
  readonly actor: AuditActor;
  readonly event: AuditEvent;
}

/** The record of `action` on a deployment by the principal (named by id; never a value, key or password). */
export function deploymentRecord(principal: Principal, deployment: { id: string; team_id: string | null }, action: string, targetType = 'deployment', targetId?: string): AuditRecord {
  return { actor: actorOf(principal), event: { action, targetType, targetId: targetId ?? deployment.id, teamId: deployment.team_id } };
}

const presentEntry = (row: AuditEntryView): AuditEntryView => ({
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
