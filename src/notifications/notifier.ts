// The notifications outbox: every event written once across instances (its dedupe key), one delivery per subscribed channel, sent at once and retried with backoff; lost instances' deliveries taken over.
import crypto from 'node:crypto';
import type { Log } from '../core/log.js';
import type { AppEvent } from '../domain/app-events.js';
import { dedupeKey, describeEvent, eventSubject, testMessage } from './event-messages.js';
import type { Channel, ClaimedDelivery, NotificationStore } from './notification-store.js';
import type { SendResult } from './send-message.js';

/** Waits between attempts: three retries after the first attempt (decisions §23). */
export const RETRY_BACKOFF_MS: readonly number[] = [1_000, 2_000, 4_000];
/** How long an instance holds a delivery beyond its next attempt before another may take it over. */
export const CLAIM_MS = 30_000;

export interface NotifierDeps {
  readonly store: NotificationStore;
  /** This instance's id (the claims carry it). */
  readonly self: string;
  /** The dashboard's address (the messages link to its pages). */
  readonly dashboard: URL;
  /** One attempt to one channel (time- and size-limited; never throws). */
  send(channel: Channel, message: ReturnType<typeof describeEvent>, signal: AbortSignal): Promise<SendResult>;
  readonly log: Log;
  readonly backoffMs?: readonly number[];
  readonly now?: () => Date;
}

/** The answer of `POST …/{id}/test`. */
export interface TestResult {
  readonly ok: boolean;
  readonly status_code?: number;
  readonly error?: string;
}

/**
 * Takes events as they happen (subscribe `notify` with `AppEvents.onAny` on every instance) and
 * sends them. Each delivery runs on its own: a slow or dead receiver delays nothing else, and the
 * event's producer never waits (it only starts the work).
 */
export class Notifier {
  readonly #deps: NotifierDeps;
  readonly #backoff: readonly number[];
  readonly #now: () => Date;
  readonly #stop = new AbortController();
  readonly #inFlight = new Set<Promise<void>>();
  /** Deliveries this instance is sending now (a sweep never takes one of its own twice). */
  readonly #sending = new Set<string>();

  constructor(deps: NotifierDeps) {
    this.#deps = deps;
    this.#backoff = deps.backoffMs ?? RETRY_BACKOFF_MS;
    this.#now = deps.now ?? (() => new Date());
  }

  /** An event happened: written to the outbox and sent, in the background. */
  notify(event: AppEvent): void {
    if (this.#stop.signal.aborted) return;
    this.#track(this.#enqueue(event, this.#now()));
  }

  /** Takes over deliveries that are due and unclaimed (another instance died holding them, or this one restarted). */
  async sweep(): Promise<void> {
    if (this.#stop.signal.aborted) return;
    const now = this.#now();
    const claimed = await this.#deps.store.claimDue(this.#deps.self, now.toISOString(), new Date(now.getTime() + CLAIM_MS).toISOString(), 50);
    for (const delivery of claimed) this.#start(delivery);
  }

  /** Sends a test message now (one attempt), records it in the channel's delivery log, and answers how it went. */
  async test(channel: Channel): Promise<TestResult> {
    const message = testMessage(crypto.randomUUID(), this.#now().toISOString(), this.#deps.dashboard);
    const result = await this.#deps.send(channel, message, this.#stop.signal);
    const outcome = result.ok ? 'delivered' : 'failed';
    // The channel may have been deleted meanwhile (its log with it): the answer still says how the send went.
    await this.#deps.store
      .recordTest(channel.id, { id: message.id, at: message.at, payload: JSON.stringify({ type: 'test' }), outcome, statusCode: result.statusCode, error: result.error })
      .catch((err: unknown) => this.#deps.log('warn', `the test message to channel ${channel.id} could not be recorded`, { err }));
    return { ok: result.ok, ...(result.statusCode === null ? {} : { status_code: result.statusCode }), ...(result.error === null ? {} : { error: result.error }) };
  }

  /** Stops sending: attempts in flight are aborted, their deliveries stay pending for the next instance or start. */
  async close(): Promise<void> {
    this.#stop.abort();
    await Promise.allSettled([...this.#inFlight]);
  }

  async #enqueue(event: AppEvent, at: Date): Promise<void> {
    const { store, self } = this.#deps;
    const subject = eventSubject(event);
    const owner = subject === 'admins' ? subject : await store.ownerOf(subject);
    if (owner === undefined) return;
    const channels = await store.channelsFor(event.type, owner);
    if (channels.length === 0) return;
    const claimedUntil = new Date(at.getTime() + CLAIM_MS).toISOString();
    const deliveries = await store.enqueue(
      { id: crypto.randomUUID(), dedupeKey: dedupeKey(event, at), type: event.type, payload: JSON.stringify(event), at: at.toISOString() },
      channels.map((c) => ({ id: crypto.randomUUID(), channelId: c.id })),
      self,
      claimedUntil,
    );
    // Another instance wrote this event first: it sends it.
    if (deliveries === undefined) return;
    for (const delivery of deliveries) this.#start(delivery);
  }

  #start(delivery: ClaimedDelivery): void {
    if (this.#sending.has(delivery.id)) return;
    this.#sending.add(delivery.id);
    this.#track(this.#deliver(delivery).finally(() => this.#sending.delete(delivery.id)));
  }

  /** Attempts until delivered, refused for good, or out of retries; each attempt's result recorded. */
  async #deliver(delivery: ClaimedDelivery): Promise<void> {
    const { store, send } = this.#deps;
    const event = JSON.parse(delivery.payload) as AppEvent;
    const message = describeEvent(event, delivery.id, delivery.at, this.#deps.dashboard);
    let attempts = delivery.attempts;
    const signal = this.#stop.signal;
    while (!signal.aborted) {
      const channel = await store.channel(delivery.channel_id);
      if (channel === undefined) return;
      const result = await send(channel, message, signal);
      // Stopped mid-attempt: left pending (and claimed a little longer), for whoever runs next.
      if (signal.aborted && !result.ok) return;
      attempts += 1;
      const wait = this.#backoff[attempts - 1];
      if (result.ok || !result.retryable || wait === undefined) {
        await store.recordAttempt(delivery.id, { outcome: result.ok ? 'delivered' : 'failed', attempts, statusCode: result.statusCode, error: result.error });
        if (!result.ok) this.#deps.log('warn', `notification ${delivery.id} to channel ${channel.id} failed after ${attempts} attempt(s)`, { event: delivery.event, statusCode: result.statusCode });
        return;
      }
      const next = new Date(this.#now().getTime() + wait);
      await store.recordAttempt(delivery.id, { outcome: 'pending', attempts, statusCode: result.statusCode, error: result.error, nextAttemptAt: next.toISOString(), claimedUntil: new Date(next.getTime() + CLAIM_MS).toISOString() });
      await sleep(wait, signal);
    }
  }

  #track(work: Promise<void>): void {
    const tracked = work.catch((err: unknown) => this.#deps.log('warn', 'a notification could not be handled', { err })).finally(() => this.#inFlight.delete(tracked));
    this.#inFlight.add(tracked);
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done(): void {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}
