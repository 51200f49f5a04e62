// Managed-database use-cases (decisions §19): create, list, read, change, delete, stop, start, credentials, metrics and logs, each authorized by the policy.
import crypto from 'node:crypto';
import { DomainError } from '../core/errors.js';
import type { Principal } from '../core/principal.js';
import { DNS_LABEL } from '../core/dns-label.js';
import { pageFromRows, type Page, type PageRequest } from '../core/page.js';
import { actorOf, type AuditRecord } from '../domain/audit.js';
import { authorizeTeam } from '../domain/policy.js';
import type { ContainerStats } from '../runtime/engine.js';
import type { DatabasesContext } from './database-context.js';
import type { DatabaseChanges, DatabaseRow } from './database-store.js';
import { DATABASE_ENGINES, type DatabaseCredentials, type DatabaseEngineName } from './engine-adapter.js';
import { ENGINES } from './engines.js';
import { detachLinkedApps, markLinksPending } from './database-links.js';
import { getDatabaseRow } from './database-access.js';
import { measureSize } from './database-containers.js';
import { startInBackground, startNow } from './provisioning.js';

const invalid = (message: string): DomainError => new DomainError('validation_error', message);

/** An audit entry of a principal's action on a database. */
export function databaseRecord(principal: Principal, db: { id: string; team_id: string | null }, action: string): AuditRecord {
  return { actor: actorOf(principal), event: { action, targetType: 'database', targetId: db.id, teamId: db.team_id } };
}

/** 32 characters of base62 from a CSPRNG (~190 bits): safe in any URL and any client's command line. */
export function newPassword(): string {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
  let out = '';
  while (out.length < 32) {
    for (const byte of crypto.randomBytes(48)) {
      // 248 = 4 × 62: bytes above it are skipped so every character is equally likely.
      if (byte < 248 && out.length < 32) out += alphabet[byte % 62];
    }
  }
  return out;
}

/** A database's name: a DNS label (it is the host name linked apps reach it by), folded to lower case. */
export function checkDatabaseName(value: unknown): string {
  const name = typeof value === 'string' ? value.trim().toLowerCase() : '';
  if (!DNS_LABEL.test(name)) throw invalid('name must be a DNS label: 1 to 63 characters of a-z, 0-9 and "-", not starting or ending with "-"');
  if (name === 'localhost') throw invalid('name "localhost" is reserved');
  return name;
}

function checkEngine(value: unknown): DatabaseEngineName {
  if (typeof value !== 'string' || !(DATABASE_ENGINES as readonly string[]).includes(value)) {
    throw invalid(`engine must be one of ${DATABASE_ENGINES.join(', ')}`);
  }
  return value as DatabaseEngineName;
}

function checkMemory(memoryMb: number, maxMemoryMb: number): number {
  if (!Number.isInteger(memoryMb) || memoryMb < 64 || memoryMb > maxMemoryMb) throw invalid(`memory_mb must be a whole number from 64 to ${maxMemoryMb} (this server's ceiling)`);
  return memoryMb * 1024 * 1024;
}

function checkCpus(cpus: number, maxCpus: number): number {
  if (!(cpus >= 0.01 && cpus <= maxCpus)) throw invalid(`cpus must be from 0.01 to ${maxCpus} (this server's ceiling)`);
  return Math.round(cpus * 1e9);
}

export interface CreateDatabaseInput {
  readonly name?: unknown;
  readonly engine?: unknown;
  readonly team_id?: string | null | undefined;
  readonly memory_mb?: number | undefined;
  readonly cpus?: number | undefined;
}

/**
 * Records a database (`creating`) and starts it in the background: it becomes `running` once it
 * accepts logins, or `failed` with the reason. A refusal (bad name or engine, a name taken, the
 * quota) leaves nothing behind.
 */
export async function createDatabase(ctx: DatabasesContext, principal: Principal, input: CreateDatabaseInput): Promise<DatabaseRow> {
  const teamId = input.team_id ?? null;
  if (teamId !== null) authorizeTeam(principal, teamId, 'owner');
  const name = checkDatabaseName(input.name);
  const engine = checkEngine(input.engine);
  const memoryBytes = input.memory_mb === undefined ? null : checkMemory(input.memory_mb, ctx.limits.maxMemoryMb);
  const nanoCpus = input.cpus === undefined ? null : checkCpus(input.cpus, ctx.limits.maxCpus);
  await ctx.quotas.assertRoom(principal, 'databases');
  const id = crypto.randomUUID();
  const now = new Date().toISOString();
  const row = {
    id,
    name,
    engine,
    image: ctx.images[engine],
    status: 'creating' as const,
    error: null,
    user_id: principal.userId,
    team_id: teamId,
    memory_bytes: memoryBytes,
    nano_cpus: nanoCpus,
    container_id: null,
    size_bytes: 0,
    worker_instance: ctx.self,
    created_at: now,
    updated_at: now,
  };
  const credentials = ENGINES[engine].credentials(name, newPassword());
  const created = await ctx.store.create(row, credentials, databaseRecord(principal, row, 'database.create'));
  if (created === 'name_taken') throw invalid(`a database named "${name}" already exists${teamId === null ? '' : ' in this team'}`);
  startInBackground(ctx, id);
  return getDatabaseRow(ctx, principal, id, 'read');
}

/** A position in the list of databases: the creation sequence number. */
export type DatabasePosition = readonly [seq: number];

/** A page of the caller's databases and their teams', newest first. */
export async function listDatabases(ctx: Pick<DatabasesContext, 'store'>, principal: Principal, page: PageRequest<DatabasePosition>): Promise<Page<DatabaseRow, DatabasePosition>> {
  const rows = await ctx.store.list(principal.userId, [...(principal.teams?.keys() ?? [])], page.after?.[0], page.limit + 1);
  return pageFromRows(rows, page.limit, (row) => [row.seq] as const);
}

/** One database, its size measured again when it runs (best effort). */
export async function getDatabase(ctx: DatabasesContext, principal: Principal, id: string): Promise<DatabaseRow> {
  const row = await getDatabaseRow(ctx, principal, id, 'read');
  if (row.status !== 'running' || row.container_id === null) return row;
  const size = await measureSize(ctx.engine, row.container_id, ENGINES[row.engine]);
  if (size === null || size === row.size_bytes) return row;
  await ctx.store.update(row.id, { size_bytes: size });
  return { ...row, size_bytes: size };
}

export interface UpdateDatabaseInput {
  readonly memory_mb?: number | null | undefined;
  readonly cpus?: number | null | undefined;
}

/** Changes a database's resource limits (null: back to the defaults); they apply from its next start. */
export async function updateDatabase(ctx: DatabasesContext, principal: Principal, id: string, input: UpdateDatabaseInput): Promise<DatabaseRow> {
  const row = await getDatabaseRow(ctx, principal, id, 'change');
  const changes: { memory_bytes?: number | null; nano_cpus?: number | null } = {};
  if (input.memory_mb !== undefined) changes.memory_bytes = input.memory_mb === null ? null : checkMemory(input.memory_mb, ctx.limits.maxMemoryMb);
  if (input.cpus !== undefined) changes.nano_cpus = input.cpus === null ? null : checkCpus(input.cpus, ctx.limits.maxCpus);
  if (Object.keys(changes).length === 0) throw invalid('name at least one field to change: memory_mb, cpus');
  await ctx.store.update(row.id, changes, databaseRecord(principal, row, 'database.update'));
  return getDatabaseRow(ctx, principal, id, 'read');
}

/**
 * Deletes a database (contract §19: DELETE removes it): its links go first (the linked apps' running
 * containers leave its network at once; their variable goes at their next release), then its
 * container, network and volume (its data), then its record.
 */
export async function deleteDatabase(ctx: DatabasesContext, principal: Principal, id: string): Promise<void> {
  const row = await getDatabaseRow(ctx, principal, id, 'manage');
  const links = await ctx.store.linksOfDatabase(row.id);
  await ctx.work.abort(row.id);
  await detachLinkedApps(ctx, row.id, links.map((l) => l.deployment_id));
  await ctx.services.remove(ctx.instanceId, row.id);
  await ctx.store.remove(row.id, databaseRecord(principal, row, 'database.delete'));
  await markLinksPending(ctx, links);
}

/** Stops a database (its data stays in its volume); stopping a stopped one is a no-op. */
export async function stopDatabase(ctx: DatabasesContext, principal: Principal, id: string): Promise<DatabaseRow> {
  const row = await getDatabaseRow(ctx, principal, id, 'change');
  if (row.status === 'creating') throw new DomainError('invalid_state', `database "${row.name}" is still being created`);
  if (row.status !== 'stopped') {
    await ctx.services.stop(ctx.instanceId, row.id, 30);
    await ctx.store.update(row.id, { status: 'stopped', error: null }, databaseRecord(principal, row, 'database.stop'));
  }
  return getDatabaseRow(ctx, principal, id, 'read');
}

/** Starts a stopped or failed database and waits until it accepts logins (`failed` with the reason otherwise). */
export async function startDatabase(ctx: DatabasesContext, principal: Principal, id: string): Promise<DatabaseRow> {
  const row = await getDatabaseRow(ctx, principal, id, 'change');
  if (row.status === 'creating') throw new DomainError('invalid_state', `database "${row.name}" is still being created`);
  if (row.status !== 'running') {
    await ctx.store.update(row.id, {}, databaseRecord(principal, row, 'database.start'));
    await startNow(ctx, row.id, AbortSignal.timeout(300_000));
  }
  return getDatabaseRow(ctx, principal, id, 'read');
}

export interface CredentialsView extends DatabaseCredentials {
  readonly host: string;
  readonly port: number;
  readonly url: string;
}

/** A database's credentials (owner or developer); every read is an audit entry. */
export async function readCredentials(ctx: DatabasesContext, principal: Principal, id: string): Promise<CredentialsView> {
  const row = await getDatabaseRow(ctx, principal, id, 'change');
  const credentials = await ctx.store.credentials(row.id, databaseRecord(principal, row, 'database.credentials.read'));
  if (credentials === undefined) throw new DomainError('not_found', 'database not found');
  const adapter = ENGINES[row.engine];
  return { ...credentials, host: row.name, port: adapter.port, url: adapter.url(credentials, row.name) };
}

/** The running database's resource use (decisions §12's shape); invalid_state when it does not run. */
export async function databaseMetrics(ctx: DatabasesContext, principal: Principal, id: string, signal?: AbortSignal): Promise<ContainerStats> {
  const row = await getDatabaseRow(ctx, principal, id, 'read');
  const container = await ctx.services.container(ctx.instanceId, row.id);
  const stats = container === undefined ? null : await ctx.engine.containerStats(container.id, signal);
  if (stats === null) throw new DomainError('invalid_state', `database "${row.name}" is not running`);
  return stats;
}

/** The database container's output; invalid_state when it has none (never started, or deleted). */
export async function databaseLogs(
  ctx: DatabasesContext,
  principal: Principal,
  id: string,
  options: { tail: number | undefined; follow: boolean; signal: AbortSignal },
): Promise<AsyncIterable<string>> {
  const row = await getDatabaseRow(ctx, principal, id, 'read');
  const container = await ctx.services.container(ctx.instanceId, row.id);
  if (container === undefined) throw new DomainError('invalid_state', `database "${row.name}" has no container yet`);
  return ctx.engine.containerLogs(container.id, { ...(options.tail === undefined ? {} : { tail: options.tail }), follow: options.follow, signal: options.signal });
}

/** What the API shows of a database. */
export interface DatabaseView {
  id: string;
  name: string;
  engine: DatabaseEngineName;
  image: string;
  status: DatabaseRow['status'];
  error: string | null;
  team_id: string | null;
  size_bytes: number;
  host: string;
  port: number;
  memory_mb: number | null;
  cpus: number | null;
  created_at: string;
  updated_at: string;
}

export function presentDatabase(row: DatabaseRow): DatabaseView {
  return {
    id: row.id,
    name: row.name,
    engine: row.engine,
    image: row.image,
    status: row.status,
    error: row.error,
    team_id: row.team_id,
    size_bytes: row.size_bytes,
    host: row.name,
    port: ENGINES[row.engine].port,
    memory_mb: row.memory_bytes === null ? null : Math.round(row.memory_bytes / 1024 / 1024),
    cpus: row.nano_cpus === null ? null : row.nano_cpus / 1e9,
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
}

export type { DatabaseChanges };
export { getDatabaseRow };
