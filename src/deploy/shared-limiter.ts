// A failure limiter whose counts are shared by every instance: each change is announced on the coordination feed.
import { FailureLimiter, type LimiterEvent } from '../domain/rate-limiter.js';
import type { Coordination } from './coordination.js';

const PREFIX = 'l:';

/**
 * A {@link FailureLimiter} named `name` on every instance: an attempt reserved, refunded or reset
 * on one is applied by the others as it is announced, so "10 wrong logins" are 10 in total, not per
 * instance. Reservations stay synchronous and local (no database round trip before the check);
 * what another instance counted arrives within the feed's latency.
 */
export function sharedFailureLimiter(
  name: string,
  options: { maxFailures: number; maxFailuresByKind?: Record<string, number>; windowMs: number },
  coordination: Coordination,
  self: string,
): FailureLimiter {
  const tag = `${PREFIX}${name}`;
  const limiter = new FailureLimiter({ ...options, onChange: (event) => coordination.announce(`${self} ${tag} ${JSON.stringify(event)}`) });
  coordination.onAnnounce((message) => {
    if (message === null) return;
    const [origin, what] = message.split(' ', 2);
    if (origin === undefined || origin === self || what !== tag) return;
    const event = parseEvent(message.slice(origin.length + tag.length + 2));
    if (event !== undefined) limiter.apply(event);
  });
  return limiter;
}

function parseEvent(text: string): LimiterEvent | undefined {
  try {
    const value = JSON.parse(text) as { op?: unknown; key?: unknown; at?: unknown };
    if (typeof value.key !== 'string') return undefined;
    if (value.op === 'reset') return { op: 'reset', key: value.key };
    if ((value.op === 'add' || value.op === 'remove') && typeof value.at === 'number') return { op: value.op, key: value.key, at: value.at };
    return undefined;
  } catch {
    return undefined;
  }
}
