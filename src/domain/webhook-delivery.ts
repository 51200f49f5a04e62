// Webhook deliveries from GitHub, Gitea/Forgejo and GitLab: who sent them, their signatures, and what they ask for.
import crypto from 'node:crypto';

/** The senders Slipway understands. */
export type Provider = 'github' | 'gitea' | 'gitlab';

/** Request headers as Node gives them (lower-case names). */
export type Headers = Readonly<Record<string, string | string[] | undefined>>;

/** Largest body a delivery may have (decisions §10). */
export const MAX_DELIVERY_BYTES = 1024 * 1024;

/** What the headers say about a delivery (nothing here is trusted before the signature is checked). */
export interface DeliveryIdentity {
  readonly provider: Provider;
  /** The event name (`push`, `ping`, GitLab's `Push Hook`…), bounded; null when not sent. */
  readonly event: string | null;
  /** The sender's delivery id, bounded; null when not sent. */
  readonly deliveryId: string | null;
}

function header(headers: Headers, name: string): string | undefined {
  const value = headers[name];
  const first = Array.isArray(value) ? value[0] : value;
  return first === undefined || first === '' ? undefined : first;
}

/** A header value fit to store and show: printable ASCII, at most `max` characters. */
function bounded(value: string | undefined, max = 100): string | null {
  if (value === undefined) return null;
  const clean = value.replace(/[^\x20-\x7e]/g, '?');
  return clean.length > max ? clean.slice(0, max) : clean;
}

/**
 * Which provider sent a delivery. Gitea and Forgejo also send GitHub's headers (for compatibility),
 * so their own headers are looked at first; GitLab sends only its own.
 */
export function identifyDelivery(headers: Headers): DeliveryIdentity {
  const has = (name: string): boolean => header(headers, name) !== undefined;
  if (has('x-gitlab-event') || has('x-gitlab-token')) {
    return { provider: 'gitlab', event: bounded(header(headers, 'x-gitlab-event')), deliveryId: bounded(header(headers, 'x-gitlab-event-uuid')) };
  }
  if (has('x-gitea-event') || has('x-forgejo-event') || has('x-gitea-signature') || has('x-forgejo-signature')) {
    return {
      provider: 'gitea',
      event: bounded(header(headers, 'x-gitea-event') ?? header(headers, 'x-forgejo-event')),
      deliveryId: bounded(header(headers, 'x-gitea-delivery') ?? header(headers, 'x-forgejo-delivery')),
    };
  }
  return { provider: 'github', event: bounded(header(headers, 'x-github-event')), deliveryId: bounded(header(headers, 'x-github-delivery')) };
}

/** Constant-time equality of two strings of any lengths (both are hashed to 32 bytes first). */
function sameSecretText(given: string, expected: string): boolean {
  const a = crypto.createHash('sha256').update(given, 'utf8').digest();
  const b = crypto.createHash('sha256').update(expected, 'utf8').digest();
  return crypto.timingSafeEqual(a, b);
}

/**
 * Checks a delivery's signature against the shared `secret`, in constant time, over the raw bytes
 * of its body: GitHub `X-Hub-Signature-256: sha256=<hex HMAC-SHA256>`, Gitea/Forgejo
 * `X-Gitea-Signature` / `X-Forgejo-Signature: <hex>` (or GitHub's header, which they also send),
 * GitLab `X-Gitlab-Token: <secret>`. Returns why it fails, or null when it holds.
 */
export function signatureProblem(provider: Provider, headers: Headers, rawBody: Buffer, secret: string): string | null {
  if (provider === 'gitlab') {
    const token = header(headers, 'x-gitlab-token');
    if (token === undefined) return 'no X-Gitlab-Token header';
    return sameSecretText(token, secret) ? null : 'X-Gitlab-Token does not match the secret';
  }
  let given: string | undefined;
  let name: string;
  if (provider === 'gitea' && (header(headers, 'x-gitea-signature') ?? header(headers, 'x-forgejo-signature')) !== undefined) {
    given = header(headers, 'x-gitea-signature') ?? header(headers, 'x-forgejo-signature');
    name = 'X-Gitea-Signature';
  } else {
    const value = header(headers, 'x-hub-signature-256');
    name = 'X-Hub-Signature-256';
    if (value !== undefined) given = value.startsWith('sha256=') ? value.slice('sha256='.length) : '';
  }
  if (given === undefined) return provider === 'github' ? 'no X-Hub-Signature-256 header' : 'no X-Gitea-Signature header';
  const expected = crypto.createHmac('sha256', secret).update(rawBody).digest('hex');
  return sameSecretText(given.toLowerCase(), expected) ? null : `${name} does not match the body`;
}

/** A delivery's body as JSON: `application/json`, or GitHub's form-encoded `payload=<json>`. Throws SyntaxError. */
export function parseDeliveryBody(rawBody: Buffer, contentType: string | undefined): unknown {
  const text = rawBody.toString('utf8');
  if (/^application\/x-www-form-urlencoded/i.test(contentType ?? '')) {
    const payload = new URLSearchParams(text).get('payload');
    if (payload === null) throw new SyntaxError('a form-encoded delivery carries its JSON in a "payload" field');
    return JSON.parse(payload);
  }
  return JSON.parse(text);
}

/** What a verified delivery asks for. */
export type DeliveryRequest =
  | { readonly kind: 'ping' }
  | { readonly kind: 'other'; readonly event: string }
  | { readonly kind: 'push'; readonly ref: string; readonly after: string }
  | { readonly kind: 'malformed'; readonly problem: string };

const SHA = /^[0-9a-f]{40}$/;

/** Reads the event and, for a push, its `ref` and `after` commit. */
export function readDelivery(identity: DeliveryIdentity, body: unknown): DeliveryRequest {
  const event = identity.event ?? '';
  // GitHub and Gitea answer a new hook with `ping`; GitLab has no ping (its "Test" sends a real push).
  if (event.toLowerCase() === 'ping') return { kind: 'ping' };
  const isPush = identity.provider === 'gitlab' ? event === 'Push Hook' || event === 'Tag Push Hook' : event === 'push';
  if (!isPush) return { kind: 'other', event: event === '' ? '(no event header)' : event };
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return { kind: 'malformed', problem: 'a push delivery must be a JSON object' };
  const { ref, after } = body as { ref?: unknown; after?: unknown };
  if (typeof ref !== 'string' || ref === '' || ref.length > 1024) return { kind: 'malformed', problem: 'the push has no "ref"' };
  if (typeof after !== 'string' || !SHA.test(after)) return { kind: 'malformed', problem: 'the push has no "after" commit (40 lower-case hex)' };
  return { kind: 'push', ref, after };
}

/** A commit id of all zeros: the ref was deleted. */
export const isDeletion = (after: string): boolean => /^0+$/.test(after);
