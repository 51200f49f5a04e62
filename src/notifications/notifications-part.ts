// The notifications part of the server: the outbox fed by every app event on this instance, its sweeper, and the context the API uses.
import type { Config } from '../config.js';
import type { BackgroundTask } from '../core/background.js';
import type { Log } from '../core/log.js';
import type { Part } from '../core/parts.js';
import type { AppEvents } from '../domain/app-events.js';
import type { ChannelsContext } from './channels.js';
import type { NotificationStore } from './notification-store.js';
import { Notifier } from './notifier.js';
import { sendMessage } from './send-message.js';

/** How often each instance looks for deliveries left pending (a retry due, an instance lost). */
export const SWEEP_MS = 2_000;
/** Events (and their deliveries) are kept this long. */
const KEEP_MS = 30 * 24 * 3_600_000;

export interface NotificationsPartDeps {
  readonly config: Config;
  readonly log: Log;
  /** This instance's id among those sharing the database. */
  readonly self: string;
  readonly store: NotificationStore;
  readonly appEvents: Pick<AppEvents, 'onAny'>;
  readonly background: { add(task: BackgroundTask): void };
}

/** Subscribes to every app event; stopped before the database closes (pending deliveries wait for the next start or instance). */
export function notificationsPart(deps: NotificationsPartDeps): Part<ChannelsContext> {
  const { config, log, store } = deps;
  const policy = { allowPrivate: config.allowPrivateTargets };
  const notifier = new Notifier({
    store,
    self: deps.self,
    dashboard: config.publicUrl,
    log,
    send: (channel, message, signal) => sendMessage(channel, message, { policy, smtp: { url: config.smtpUrl, from: config.smtpFrom } }, signal),
  });
  const unsubscribe = deps.appEvents.onAny((event) => notifier.notify(event));
  deps.background.add({ name: 'sending pending notifications', scope: 'everyInstance', everyMs: SWEEP_MS, run: () => notifier.sweep() });
  deps.background.add({ name: 'pruning old notifications', scope: 'leaderOnly', everyMs: 3_600_000, immediately: true, run: () => store.prune(new Date(Date.now() - KEEP_MS).toISOString()) });
  return {
    offers: { store, notifier, policy },
    stop: async () => {
      unsubscribe();
      await notifier.close();
    },
  };
}
