// Notification channels as a user sees them (decisions §23): create, list, read, change, delete, test, deliveries; each checked against the policy.
import crypto from 'node:crypto';
import { DomainError } from '../core/errors.js';
import { nowIso } from '../core/now.js';
import { pageFromList, type Page, type PageRequest } from '../core/page.js';
import type { Principal } from '../core/principal.js';
import type { AppEventType } from '../domain/app-events.js';
import { actorOf, type AuditRecord } from '../domain/audit.js';
import { authorizeDeployment, authorizeTeam, type DeploymentAction } from '../domain/policy.js';
import type { Notifier, TestResult } from './notifier.js';
import { CHANNEL_TYPES, type Channel, type ChannelChanges, type ChannelType, type Delivery, type NotificationStore } from './notification-store.js';
import { checkTarget, ForbiddenTargetError, type TargetPolicy } from './outgoing-request.js';

/** The events of contract §23, in the order the dashboard offers them. */
export const EVENT_TYPES: readonly AppEventType[] = ['deploy.succeeded', 'deploy.failed', 'app.crashed', 'backup.failed', 'backup.verified', 'job.failed', 'certificate.failed', 'node.down'];

/** Deliveries the log shows per channel. */
export const DELIVERIES_SHOWN = 100;

/** What the channel use-cases need. */
export interface ChannelsContext {
  readonly store: NotificationStore;
  readonly notifier: Pick<Notifier, 'test'>;
  /** Where channel URLs may point (SLIPWAY_ALLOW_PRIVATE_TARGETS). */
  readonly policy: TargetPolicy;
}

/** A channel as the API shows it: the URL shortened to its origin (it is a credential), the secret never. */
export interface ChannelView {
  readonly id: string;
  readonly name: string;
  readonly type: ChannelType;
  readonly url: string | null;
  readonly email: string | null;
  readonly events: readonly AppEventType[];
  readonly team_id: string | null;
  readonly created_at: string;
  readonly updated_at: string;
  /** The webhook signing secret: in the answer of its creation or rotation only. */
  readonly secret?: string;
}

export interface CreateChannelInput {
  readonly name: string;
  readonly type: string;
  readonly url?: string | undefined;
  readonly email?: string | undefined;
  readonly events: readonly string[];
  readonly team_id?: string | null | undefined;
}

export interface UpdateChannelInput {
  readonly name?: string | undefined;
  readonly url?: string | undefined;
  readonly email?: string | undefined;
  readonly events?: readonly string[] | undefined;
  readonly rotate_secret?: boolean | undefined;
}

const invalid = (message: string): DomainError => new DomainError('validation_error', message);

/** `https://hooks.slack.com/…`: enough to recognize the channel, nothing to post with. */
export function maskUrl(url: string): string {
  const parsed = new URL(url);
  return `${parsed.protocol}//${parsed.host}/…`;
}

export function presentChannel(channel: Channel, secret?: string): ChannelView {
  return {
    id: channel.id,
    name: channel.name,
    type: channel.type,
    url: channel.url === null ? null : maskUrl(channel.url),
    email: channel.email,
    events: channel.events,
    team_id: channel.team_id,
    created_at: channel.created_at,
    updated_at: channel.updated_at,
    ...(secret === undefined ? {} : { secret }),
  };
}

/** The audit entry of a change to a channel (named by id; never its URL or secret). */
const record = (principal: Principal, channel: { id: string; team_id: string | null }, action: string): AuditRecord => ({
  actor: actorOf(principal),
  event: { action: `notification_channel.${action}`, targetType: 'notification_channel', targetId: channel.id, teamId: channel.team_id },
});

const newSecret = (): string => `whsec_${crypto.randomBytes(24).toString('base64url')}`;

function checkName(name: string): string {
  const trimmed = name.trim();
  if (trimmed === '' || trimmed.length > 100) throw invalid('name must be 1 to 100 characters');
  return trimmed;
}

function checkEvents(events: readonly string[]): AppEventType[] {
  if (events.length === 0) throw invalid(`events must name at least one of: ${EVENT_TYPES.join(', ')}`);
  const unknown = events.find((e) => !(EVENT_TYPES as readonly string[]).includes(e));
  if (unknown !== undefined) throw invalid(`events: unknown event "${unknown.slice(0, 60)}" (one of ${EVENT_TYPES.join(', ')})`);
  return EVENT_TYPES.filter((e) => events.includes(e));
}

function checkEmail(email: string): string {
  const trimmed = email.trim();
  // One address, no display name and no header injection: what the To: line carries as is.
  if (trimmed.length > 254 || !/^[^\s@<>,;"]+@[^\s@<>,;"]+\.[^\s@<>,;"]+$/.test(trimmed)) throw invalid('email must be one e-mail address such as ops@example.com');
  return trimmed;
}

/** A channel URL: http(s), no more than 2,048 characters, and (unless allowed) not aimed at a private address. */
async function checkUrl(url: string, policy: TargetPolicy): Promise<string> {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw invalid('url must be an absolute http:// or https:// URL');
  }
  if (url.length > 2048) throw invalid('url must be at most 2048 characters');
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') throw invalid('url must be an http:// or https:// URL');
  try {
    await checkTarget(parsed, policy);
  } catch (err) {
    if (err instanceof ForbiddenTargetError) throw invalid(`url: ${err.message}`);
    // A name that does not resolve now may later: it is checked again at every delivery.
  }
  return parsed.href;
}

/** The channel as `principal` may `action` it: another user's (or an unknown team's) → 404, a team role too low → 403. */
async function authorizedChannel(ctx: ChannelsContext, principal: Principal, id: string, action: DeploymentAction): Promise<Channel> {
  const channel = /^[0-9a-f-]{36}$/.test(id) ? await ctx.store.channel(id) : undefined;
  return authorizeDeployment(principal, channel, action, 'notification channel');
}

/** `POST /notification-channels`: a webhook channel's answer carries its signing secret, once. */
export async function createChannel(ctx: ChannelsContext, principal: Principal, input: CreateChannelInput): Promise<ChannelView> {
  const type = input.type as ChannelType;
  if (!CHANNEL_TYPES.includes(type)) throw invalid(`type must be one of ${CHANNEL_TYPES.join(', ')}`);
  const teamId = input.team_id ?? null;
  // A team's channel is created and deleted by its owners, as its deployments are (contract, Part four; §18).
  if (teamId !== null) authorizeTeam(principal, teamId, 'owner');
  const name = checkName(input.name);
  const events = checkEvents(input.events);
  let url: string | null = null;
  let email: string | null = null;
  if (type === 'email') {
    if (input.url !== undefined) throw invalid('url is not used by an email channel (give email)');
    if (input.email === undefined) throw invalid('email is required for an email channel');
    email = checkEmail(input.email);
  } else {
    if (input.email !== undefined) throw invalid(`email is only used by an email channel`);
    if (input.url === undefined) throw invalid(`url is required for a ${type} channel`);
    url = await checkUrl(input.url, ctx.policy);
  }
  const secret = type === 'webhook' ? newSecret() : null;
  const at = nowIso();
  const channel: Channel = { id: crypto.randomUUID(), user_id: principal.userId, team_id: teamId, name, type, url, email, secret, events, created_at: at, updated_at: at };
  await ctx.store.createChannel(channel, record(principal, channel, 'create'));
  return presentChannel(channel, secret ?? undefined);
}

/** Where a page of channels ends: its last channel's creation time and id. */
export type ChannelPosition = readonly [createdAt: string, id: string];

/** `GET /notification-channels`: the caller's own and their teams' (one team's with `teamId`), oldest first, a page at a time (§14). */
export async function listChannels(ctx: ChannelsContext, principal: Principal, teamId: string | undefined, page: PageRequest<ChannelPosition>): Promise<Page<ChannelView, ChannelPosition>> {
  let channels: Channel[];
  if (teamId !== undefined) {
    authorizeTeam(principal, teamId, 'viewer');
    channels = (await ctx.store.listChannels(principal.userId, [teamId])).filter((c) => c.team_id === teamId);
  } else {
    channels = await ctx.store.listChannels(principal.userId, [...(principal.teams?.keys() ?? [])]);
  }
  const result = pageFromList(channels, page, (c) => [c.created_at, c.id] as const);
  return { items: result.items.map((c) => presentChannel(c)), next: result.next };
}

export async function getChannel(ctx: ChannelsContext, principal: Principal, id: string): Promise<ChannelView> {
  return presentChannel(await authorizedChannel(ctx, principal, id, 'read'));
}

/** `PATCH …/{id}`: name, url (or email), events; `rotate_secret` makes a new webhook secret, shown in this answer only. */
export async function updateChannel(ctx: ChannelsContext, principal: Principal, id: string, input: UpdateChannelInput): Promise<ChannelView> {
  const channel = await authorizedChannel(ctx, principal, id, 'change');
  const changes: { -readonly [K in keyof ChannelChanges]: ChannelChanges[K] } = {};
  if (input.name !== undefined) changes.name = checkName(input.name);
  if (input.events !== undefined) changes.events = checkEvents(input.events);
  if (input.url !== undefined) {
    if (channel.type === 'email') throw invalid('url is not used by an email channel (give email)');
    changes.url = await checkUrl(input.url, ctx.policy);
  }
  if (input.email !== undefined) {
    if (channel.type !== 'email') throw invalid('email is only used by an email channel');
    changes.email = checkEmail(input.email);
  }
  let secret: string | undefined;
  if (input.rotate_secret === true) {
    if (channel.type !== 'webhook') throw invalid('rotate_secret: only a webhook channel has a signing secret');
    secret = newSecret();
    changes.secret = secret;
  }
  const at = nowIso();
  await ctx.store.updateChannel(channel.id, changes, at, record(principal, channel, secret === undefined ? 'update' : 'rotate_secret'));
  return presentChannel({ ...channel, ...changes, updated_at: at }, secret);
}

export async function deleteChannel(ctx: ChannelsContext, principal: Principal, id: string): Promise<void> {
  const channel = await authorizedChannel(ctx, principal, id, 'manage');
  await ctx.store.deleteChannel(channel.id, record(principal, channel, 'delete'));
}

/** `POST …/{id}/test`: a test message sent now; the answer says whether it arrived. */
export async function testChannel(ctx: ChannelsContext, principal: Principal, id: string): Promise<TestResult> {
  const channel = await authorizedChannel(ctx, principal, id, 'change');
  return ctx.notifier.test(channel);
}

/** `GET …/{id}/deliveries`: one entry per message, newest first. */
export async function listDeliveries(ctx: ChannelsContext, principal: Principal, id: string): Promise<Array<Omit<Delivery, 'channel_id' | 'event_id'>>> {
  const channel = await authorizedChannel(ctx, principal, id, 'read');
  return (await ctx.store.deliveries(channel.id, DELIVERIES_SHOWN)).map(({ id: deliveryId, event, at, outcome, attempts, status_code, error }) => ({ id: deliveryId, event, at, outcome, attempts, status_code, error }));
}
