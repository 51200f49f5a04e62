// Calls between control-plane instances (a visitor forwarded to the instance holding a tunnel): signed with a key derived from the installation key.
import crypto from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import { FORWARD_HEADERS } from '../proxy/forward-headers.js';

export { FORWARD_HEADER_NAMES, FORWARD_HEADERS } from '../proxy/forward-headers.js';

/** The HKDF info label of the inter-instance key (its own purpose: never the key that encrypts values). */
export const INSTANCE_CALL_KEY_INFO = 'slipway inter-instance calls v1';
/** How far a call's timestamp may be from the receiver's clock, either way; nonces are remembered this long. */
export const CALL_WINDOW_MS = 30_000;

/** What is signed: the request as the holder will serve it, the visitor's address, and who it is for. */
export interface CallFacts {
  readonly method: string;
  /** The Host header (the tunnel's host). */
  readonly host: string;
  /** The request target (path and query). */
  readonly path: string;
  /** The visitor's address, as X-Forwarded-For will show it to the app. */
  readonly forwardedFor: string;
  /** The visitor's scheme, as X-Forwarded-Proto will show it. */
  readonly proto: string;
  /** The instance id the call is for (a call cannot be replayed to another instance). */
  readonly target: string;
}

export type Verified = { readonly ok: true; readonly forwardedFor: string; readonly proto: string } | { readonly ok: false; readonly message: string };

const NONCE = /^[A-Za-z0-9_-]{16,64}$/;
const SIGNATURE = /^[0-9a-f]{64}$/;
const TIMESTAMP = /^\d{1,15}$/;
const SWEEP_MS = 1000;

/** True when a request carries any forward header: it is an inter-instance call, verified or refused (never served as a visitor's). */
export function isInstanceCall(headers: IncomingHttpHeaders): boolean {
  return headers[FORWARD_HEADERS.signature] !== undefined || headers[FORWARD_HEADERS.instance] !== undefined || headers[FORWARD_HEADERS.nonce] !== undefined;
}

/**
 * Signs calls to other instances and verifies calls to this one: HMAC-SHA256 over the method,
 * host, path, visitor address and scheme, timestamp, nonce and target instance, with a key every
 * instance derives from the installation key. A call is accepted once, within {@link CALL_WINDOW_MS}.
 */
export class InstanceCalls {
  readonly #key: Buffer;
  readonly #self: string;
  readonly #now: () => number;
  readonly #windowMs: number;
  /** Nonces accepted, with when they may be forgotten (their timestamp has left the window). */
  readonly #seen = new Map<string, number>();
  #sweptAt = 0;

  /** `key`: the derived key (see {@link INSTANCE_CALL_KEY_INFO}); `self`: this instance's id. */
  constructor(key: Buffer, self: string, options: { now?: () => number; windowMs?: number } = {}) {
    this.#key = Buffer.from(key);
    this.#self = self;
    this.#now = options.now ?? Date.now;
    this.#windowMs = options.windowMs ?? CALL_WINDOW_MS;
  }

  /** The forward headers of a call (a fresh nonce and the current time), as `[name, value, …]`. */
  sign(facts: CallFacts): string[] {
    const timestamp = String(this.#now());
    const nonce = crypto.randomBytes(18).toString('base64url');
    const signature = this.#mac(facts, timestamp, nonce);
    return [
      FORWARD_HEADERS.timestamp, timestamp,
      FORWARD_HEADERS.nonce, nonce,
      FORWARD_HEADERS.instance, facts.target,
      FORWARD_HEADERS.for, facts.forwardedFor,
      FORWARD_HEADERS.proto, facts.proto,
      FORWARD_HEADERS.signature, signature,
    ];
  }

  /** Checks a call made to this instance; a good one's nonce is remembered, so it is accepted once. */
  verify(method: string, host: string, path: string, headers: IncomingHttpHeaders): Verified {
    const one = (name: string): string | undefined => {
      const value = headers[name];
      return typeof value === 'string' ? value : undefined;
    };
    const timestamp = one(FORWARD_HEADERS.timestamp);
    const nonce = one(FORWARD_HEADERS.nonce);
    const target = one(FORWARD_HEADERS.instance);
    const forwardedFor = one(FORWARD_HEADERS.for);
    const proto = one(FORWARD_HEADERS.proto);
    const signature = one(FORWARD_HEADERS.signature);
    if (timestamp === undefined || nonce === undefined || target === undefined || forwardedFor === undefined || proto === undefined || signature === undefined) {
      return refused('the inter-instance call is missing one of its signed headers');
    }
    if (!TIMESTAMP.test(timestamp) || !NONCE.test(nonce) || !SIGNATURE.test(signature) || (proto !== 'http' && proto !== 'https')) {
      return refused('the inter-instance call has a malformed signed header');
    }
    const expected = Buffer.from(this.#mac({ method, host, path, forwardedFor, proto, target }, timestamp, nonce), 'hex');
    if (!crypto.timingSafeEqual(expected, Buffer.from(signature, 'hex'))) return refused('the inter-instance call is not signed with this installation\'s key');
    if (target !== this.#self) return refused('the inter-instance call is meant for another instance');
    const now = this.#now();
    const at = Number(timestamp);
    if (Math.abs(now - at) > this.#windowMs) return refused(`the inter-instance call is older than ${this.#windowMs / 1000} s (or from a clock that far off)`);
    this.#sweep(now);
    if (this.#seen.has(nonce)) return refused('the inter-instance call was already made once (a replay)');
    this.#seen.set(nonce, at + this.#windowMs);
    return { ok: true, forwardedFor, proto };
  }

  #mac(facts: CallFacts, timestamp: string, nonce: string): string {
    const text = ['slipway-forward-v1', facts.method.toUpperCase(), facts.host.toLowerCase(), facts.path, timestamp, nonce, facts.target, facts.forwardedFor, facts.proto].join('\n');
    return crypto.createHmac('sha256', this.#key).update(text, 'utf8').digest('hex');
  }

  /** Forgets nonces whose timestamps have left the window (a replay of them is refused as too old). */
  #sweep(now: number): void {
    if (now - this.#sweptAt < SWEEP_MS) return;
    this.#sweptAt = now;
    for (const [nonce, until] of this.#seen) if (until < now) this.#seen.delete(nonce);
  }
}

function refused(message: string): Verified {
  return { ok: false, message };
}
