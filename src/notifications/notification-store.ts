// The notifications port: channels, the outbox of events, and deliveries with their claims (one implementation over the database, src/db/notification-store.ts).
import type { AppEventType } from '../domain/app-events.js';
import type { AuditRecord } from '../domain/audit.js';

export const CHANNEL_TYPES = ['slack', 'discord', 'webhook', 'email'] as const;
export type ChannelType = (typeof CHANNEL_TYPES)[number];

/** A channel with its URL and secret in clear (the store encrypts them at rest). */
export interface Channel {
  readonly id: string;
  /** Its creator; the owner of a channel without a team. */
  readonly user_id: string;
  readonly team_id: string | null;
  readonly name: string;
  readonly type: ChannelType;
  readonly url: string | null;
  readonly email: string | null;
  /** The webhook signing secret (webhook channels only). */
  readonly secret: string | null;
  readonly events: readonly AppEventType[];
  readonly created_at: string;
  readonly updated_at: string;
}

export type ChannelChanges = Partial<Pick<Channel, 'name' | 'url' | 'email' | 'secret' | 'events'>>;

/** Whose object an event is about: a user's, a team's, or the platform's (its administrators'). */
export type EventOwner = { readonly userId: string; readonly teamId: string | null } | 'admins';

export type DeliveryOutcome = 'pending' | 'delivered' | 'failed';

/** One message to one channel, as the delivery log shows it. */
export interface Delivery {
  readonly id: string;
  readonly channel_id: string;
  readonly event_id: string;
  readonly event: string;
  readonly at: string;
  readonly outcome: DeliveryOutcome;
  readonly attempts: number;
  readonly status_code: number | null;
  readonly error: string | null;
}

/** A delivery an instance holds the claim on, with its event's payload (JSON). */
export interface ClaimedDelivery extends Delivery {
  readonly payload: string;
}

/** An event as it enters the outbox. */
export interface OutboxEvent {
  readonly id: string;
  /** Deterministic per event (e.g. `app.crashed:<release>:<since>`): two instances seeing it write one row. */
  readonly dedupeKey: string;
  readonly type: AppEventType;
  readonly payload: string;
  readonly at: string;
}

export interface NotificationStore {
  /** Creation, change and deletion append their audit record in the same transaction. */
  createChannel(channel: Channel, audit: AuditRecord): Promise<void>;
  channel(id: string): Promise<Channel | undefined>;
  /** The user's own channels and those of the teams given, oldest first. */
  listChannels(userId: string, teamIds: readonly string[]): Promise<Channel[]>;
  updateChannel(id: string, changes: ChannelChanges, at: string, audit: AuditRecord): Promise<void>;
  deleteChannel(id: string, audit: AuditRecord): Promise<void>;
  /** The owner of a deployment or a managed database (undefined when it no longer exists). */
  ownerOf(ref: { deploymentId?: string; databaseId?: string }): Promise<EventOwner | undefined>;
  /** The channels that subscribed to `type` and belong to `owner`. */
  channelsFor(type: AppEventType, owner: EventOwner): Promise<Channel[]>;
  /**
   * Writes the event and one pending delivery per channel, claimed by `claimedBy` until
   * `claimedUntil`, in one transaction; undefined when an event with its key is there already.
   */
  enqueue(event: OutboxEvent, deliveries: ReadonlyArray<{ id: string; channelId: string }>, claimedBy: string, claimedUntil: string): Promise<ClaimedDelivery[] | undefined>;
  /** Claims pending deliveries that are due and whose claim lapsed (a lost or busy instance's), at most `limit`. */
  claimDue(claimedBy: string, now: string, claimedUntil: string, limit: number): Promise<ClaimedDelivery[]>;
  /** Records an attempt's result; `pending` with the next attempt's time and a longer claim. */
  recordAttempt(id: string, result: { outcome: DeliveryOutcome; attempts: number; statusCode: number | null; error: string | null; nextAttemptAt?: string; claimedUntil?: string }): Promise<void>;
  /**
   * Records a test message (`POST …/{id}/test`, event `test`) as sent, with its one attempt's
   * outcome: the delivery log has one entry per message, tests included (decisions §23).
   */
  recordTest(channelId: string, test: { id: string; at: string; payload: string; outcome: Exclude<DeliveryOutcome, 'pending'>; statusCode: number | null; error: string | null }): Promise<void>;
  /** A channel's last deliveries, newest first. */
  deliveries(channelId: string, limit: number): Promise<Delivery[]>;
  /** Drops events (and their deliveries) older than `before`. */
  prune(before: string): Promise<void>;
}
