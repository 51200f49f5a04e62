// Backup destination use-cases (decisions §20): create, list, read, change, delete and test, each authorized by the policy; the secret is stored encrypted and never shown.
import crypto from 'node:crypto';
import { Readable } from 'node:stream';
import { DomainError } from '../core/errors.js';
import type { Principal } from '../core/principal.js';
import { OBJECT_NAME_RULE, objectName } from '../core/object-name.js';
import { pageFromRows, type Page, type PageRequest } from '../core/page.js';
import { actorOf, type AuditRecord } from '../domain/audit.js';
import { assertUuid } from '../domain/deployments.js';
import { authorizeDeployment, authorizeTeam, type DeploymentAction } from '../domain/policy.js';
import type { BackupsContext } from './backups-context.js';
import { DESTINATION_TYPES, type DestinationRow, type DestinationType, type S3Settings } from './backup-store.js';
import { localDestinationDir, localObjectStore } from './local-object-store.js';
import { DestinationError, errorDetail, type ObjectStore } from './object-store.js';
import { s3ObjectStore } from './s3-object-store.js';
import { refusedTarget } from './target-address.js';

const invalid = (message: string): DomainError => new DomainError('validation_error', message);
/** Time a destination test may take in all. */
const TEST_TIMEOUT_MS = 30_000;

const record = (principal: Principal, row: { id: string; team_id: string | null }, action: string): AuditRecord => ({
  actor: actorOf(principal),
  event: { action, targetType: 'backup_destination', targetId: row.id, teamId: row.team_id },
});

/** A destination the caller may `action`: missing, another user's or another team's → 404; a member below the role → 403. */
export async function getDestinationRow(ctx: Pick<BackupsContext, 'store'>, principal: Principal, id: string, action: DeploymentAction): Promise<DestinationRow> {
  try {
    assertUuid(id, 'backup destination');
  } catch {
    throw new DomainError('not_found', 'backup destination not found');
  }
  return authorizeDeployment(principal, await ctx.store.getDestination(id), action, 'backup destination');
}

/** The object store of a destination, its secret decrypted. */
export async function openDestination(ctx: Pick<BackupsContext, 'store' | 'dataDir' | 'allowPrivateTargets'>, row: DestinationRow): Promise<ObjectStore> {
  if (row.type === 'local' || row.settings === null) return localObjectStore(localDestinationDir(ctx.dataDir, row.id));
  return s3ObjectStore(row.settings, (await ctx.store.destinationSecret(row.id)) ?? '', ctx.allowPrivateTargets);
}

/** A destination's name: free text (contract §20 gives no rule), trimmed, case kept; unique per owner (the store says when taken). */
function checkName(value: unknown): string {
  const name = objectName(value);
  if (name === undefined) throw invalid(`name must be ${OBJECT_NAME_RULE}`);
  return name;
}

function text(body: Record<string, unknown>, key: string, required: boolean, max = 1024): string | undefined {
  const value = body[key];
  if (value === undefined || value === null || value === '') {
    if (required) throw invalid(`${key} is required for an s3 destination`);
    return undefined;
  }
  if (typeof value !== 'string' || value.length > max || /[\u0000-\u001f]/.test(value)) throw invalid(`${key} must be a string of at most ${max} characters`);
  return value.trim();
}

/** The S3 settings of a create or change (`base`: the current ones for a change), the endpoint checked against the address rule (unless private targets are allowed). */
export async function checkS3(ctx: Pick<BackupsContext, 'allowPrivateTargets'>, body: Record<string, unknown>, base: S3Settings | undefined): Promise<S3Settings> {
  const required = base === undefined;
  const endpoint = text(body, 'endpoint', required) ?? base!.endpoint;
  let url: URL;
  try {
    url = new URL(endpoint);
  } catch {
    throw invalid('endpoint must be an http:// or https:// URL');
  }
  if ((url.protocol !== 'http:' && url.protocol !== 'https:') || url.username !== '' || url.password !== '' || url.search !== '' || url.hash !== '') {
    throw invalid('endpoint must be an http:// or https:// URL without credentials, query or fragment');
  }
  const bucket = text(body, 'bucket', required, 63) ?? base!.bucket;
  if (!/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/.test(bucket)) throw invalid('bucket must be an S3 bucket name: 3 to 63 characters of a-z, 0-9, "." and "-"');
  let prefix = body['prefix'] === undefined ? (base?.prefix ?? '') : (text(body, 'prefix', false, 512) ?? '');
  prefix = prefix.replace(/^\/+/, '');
  if (prefix !== '' && !prefix.endsWith('/')) prefix += '/';
  if (prefix.split('/').some((segment) => segment === '..' || segment === '.')) throw invalid('prefix must not contain "." or ".." segments');
  const forcePathStyle = body['force_path_style'] ?? base?.force_path_style ?? false;
  if (typeof forcePathStyle !== 'boolean') throw invalid('force_path_style must be true or false');
  const settings: S3Settings = {
    endpoint: url.toString().replace(/\/$/, ''),
    region: text(body, 'region', false, 64) ?? base?.region ?? 'us-east-1',
    bucket,
    prefix,
    access_key_id: text(body, 'access_key_id', required, 256) ?? base!.access_key_id,
    force_path_style: forcePathStyle,
  };
  // With private targets allowed there is nothing to refuse here: a host that does not resolve (yet)
  // is recorded, and every use resolves it again (s3-object-store.ts: `test` answers step `resolve`).
  // Without, an address that cannot be checked is refused.
  if (!ctx.allowPrivateTargets) {
    const refused = await refusedTarget(url, false);
    if (refused !== undefined) throw invalid(`endpoint refused: ${refused}`);
  }
  return settings;
}

export interface DestinationInput {
  readonly [key: string]: unknown;
}

/** Records a destination. A refusal (bad field, a private endpoint, a name taken) leaves nothing behind. */
export async function createDestination(ctx: BackupsContext, principal: Principal, body: DestinationInput): Promise<DestinationRow> {
  const teamId = typeof body['team_id'] === 'string' ? body['team_id'] : null;
  if (teamId !== null) authorizeTeam(principal, teamId, 'owner');
  const name = checkName(body['name']);
  const type = body['type'];
  if (typeof type !== 'string' || !(DESTINATION_TYPES as readonly string[]).includes(type)) throw invalid(`type must be one of ${DESTINATION_TYPES.join(', ')}`);
  let settings: S3Settings | null = null;
  let secret: string | null = null;
  if (type === 's3') {
    settings = await checkS3(ctx, body, undefined);
    secret = text(body, 'secret_access_key', true, 256)!;
  }
  const now = new Date().toISOString();
  const row = { id: crypto.randomUUID(), name, type: type as DestinationType, user_id: principal.userId, team_id: teamId, settings, created_at: now, updated_at: now };
  const created = await ctx.store.createDestination(row, secret, record(principal, row, 'backup_destination.create'));
  if (created === 'name_taken') throw invalid(`a backup destination named "${name}" already exists${teamId === null ? '' : ' in this team'}`);
  return getDestinationRow(ctx, principal, row.id, 'read');
}

export type DestinationPosition = readonly [seq: number];

export async function listDestinations(ctx: Pick<BackupsContext, 'store'>, principal: Principal, page: PageRequest<DestinationPosition>): Promise<Page<DestinationRow, DestinationPosition>> {
  const rows = await ctx.store.listDestinations(principal.userId, [...(principal.teams?.keys() ?? [])], page.after?.[0], page.limit + 1);
  return pageFromRows(rows, page.limit, (row) => [row.seq] as const);
}

/** Changes a destination's name or S3 settings (a new secret replaces the old one; none given keeps it). */
export async function updateDestination(ctx: BackupsContext, principal: Principal, id: string, body: DestinationInput): Promise<DestinationRow> {
  const row = await getDestinationRow(ctx, principal, id, 'manage');
  if (body['type'] !== undefined && body['type'] !== row.type) throw invalid('type cannot be changed: create another destination');
  const name = body['name'] === undefined ? undefined : checkName(body['name']);
  const s3Keys = ['endpoint', 'region', 'bucket', 'prefix', 'access_key_id', 'secret_access_key', 'force_path_style'];
  const touchesS3 = s3Keys.some((k) => body[k] !== undefined);
  if (touchesS3 && row.type !== 's3') throw invalid('a local destination has no S3 settings');
  const settings = touchesS3 ? await checkS3(ctx, body, row.settings ?? undefined) : undefined;
  const secret = body['secret_access_key'] === undefined ? undefined : text(body, 'secret_access_key', true, 256);
  const changes = { ...(name === undefined ? {} : { name }), ...(settings === undefined ? {} : { settings }) };
  if (Object.keys(changes).length === 0 && secret === undefined) throw invalid(`name at least one field to change: name, ${s3Keys.join(', ')}`);
  const updated = await ctx.store.updateDestination(row.id, changes, secret, record(principal, row, 'backup_destination.update'));
  if (updated === 'name_taken') throw invalid(`a backup destination named "${name ?? ''}" already exists`);
  if (updated === 'gone') throw new DomainError('not_found', 'backup destination not found');
  return getDestinationRow(ctx, principal, id, 'read');
}

/** Deletes a destination; one a database's schedule uses is refused (409 naming the databases). Its objects stay where they are. */
export async function deleteDestination(ctx: BackupsContext, principal: Principal, id: string): Promise<void> {
  const row = await getDestinationRow(ctx, principal, id, 'manage');
  const users = await ctx.store.schedulesUsing(row.id);
  if (users.length > 0) {
    const names = users.map((u) => `"${u.database_name}"`).join(', ');
    throw new DomainError('invalid_state', `backup destination "${row.name}" is used by the backup schedule of ${names}: change or remove those schedules first`);
  }
  await ctx.store.removeDestination(row.id, record(principal, row, 'backup_destination.delete'));
}

export type DestinationTestResult = { ok: true } | { ok: false; step: DestinationError['step']; message: string };

/** Writes, reads back and deletes a probe object; the first step that fails is named (resolve, auth, write, read, delete). */
export async function testDestination(ctx: BackupsContext, principal: Principal, id: string): Promise<DestinationTestResult> {
  const row = await getDestinationRow(ctx, principal, id, 'change');
  const signal = AbortSignal.timeout(TEST_TIMEOUT_MS);
  const objects = await openDestination(ctx, row);
  const key = `.slipway-probe-${crypto.randomBytes(8).toString('hex')}`;
  const content = crypto.randomBytes(32);
  try {
    await objects.reach(signal);
    await objects.authorize(signal);
    await objects.put(key, streamOf(content), signal).catch((err: unknown) => {
      throw err instanceof DestinationError ? err : new DestinationError('write', errorDetail(err));
    });
    let back: Buffer;
    try {
      const chunks: Buffer[] = [];
      for await (const chunk of await objects.get(key, signal)) chunks.push(Buffer.from(chunk as Uint8Array));
      back = Buffer.concat(chunks);
    } catch (err) {
      throw err instanceof DestinationError ? err : new DestinationError('read', errorDetail(err));
    }
    if (!back.equals(content)) throw new DestinationError('read', 'the probe object read back differs from what was written');
    await objects.delete(key, signal);
    return { ok: true };
  } catch (err) {
    if (err instanceof DestinationError) return { ok: false, step: err.step, message: err.message };
    const timedOut = signal.aborted;
    return { ok: false, step: 'resolve', message: timedOut ? `the destination did not answer within ${TEST_TIMEOUT_MS / 1000} s` : errorDetail(err) };
  }
}

const streamOf = (content: Buffer): Readable => Readable.from([content]);

/** What the API shows of a destination: never its secret. */
export interface DestinationView {
  id: string;
  name: string;
  type: DestinationType;
  team_id: string | null;
  endpoint?: string;
  region?: string;
  bucket?: string;
  prefix?: string;
  access_key_id?: string;
  force_path_style?: boolean;
  created_at: string;
  updated_at: string;
}

export function presentDestination(row: DestinationRow): DestinationView {
  return {
    id: row.id,
    name: row.name,
    type: row.type,
    team_id: row.team_id,
    ...(row.settings === null ? {} : { ...row.settings }),
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
}
