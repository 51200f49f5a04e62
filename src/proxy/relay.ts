// The one place an upstream's answer reaches a visitor: whatever an app sends, a broken answer fails that request alone.
import { request as httpRequest, type ClientRequest, type IncomingMessage, type RequestOptions, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { writePage, type Page } from './pages.js';

/** An upstream answer the proxy refuses to pass on (its `code` says why; the message is for logs). */
export class InvalidUpstreamAnswer extends Error {
  override readonly name = 'InvalidUpstreamAnswer';
  readonly code: string;

  constructor(code: string, message: string) {
    super(message);
    this.code = code;
  }
}

export interface RelayHooks {
  /** Called with the upstream's status once its head was passed on to the visitor. */
  onStatus?(status: number): void;
  /**
   * Called (at most once) when the exchange failed before anything was sent to the visitor: a refused
   * or reset connection, a parse error, a head Node would not send (status outside 100–599, a header or
   * reason phrase it rejects), or a close without an answer. The hook answers the visitor: an error
   * page (see {@link failResponse}) or a retry. Not called once the visitor has gone away.
   */
  onFailure(err: Error & { code?: string }): void;
}

/**
 * Opens an upstream request with Node's HTTP client; a request Node refuses to build (a method, path
 * or header it will not send) comes back as the Error instead of a throw.
 */
export function openUpstreamRequest(options: RequestOptions): ClientRequest | Error {
  try {
    return httpRequest(options);
  } catch (err) {
    return err instanceof Error ? err : new Error(String(err));
  }
}

/**
 * Relays `proxyReq`'s answer to `res`. Every way the upstream can fail ends in one outcome for this
 * request only: before the visitor got a head, `hooks.onFailure` (a 502); after, the visitor's
 * connection is closed, so a broken body is never mistaken for a complete short one. Nothing the
 * upstream sends can make this throw.
 */
export function relayResponse(proxyReq: ClientRequest, res: ServerResponse, hooks: RelayHooks): void {
  let settled = false;
  let relayed: IncomingMessage | undefined;
  const fail = (err: Error & { code?: string }): void => {
    if (settled) return;
    settled = true;
    if (res.headersSent) {
      res.destroy();
      return;
    }
    // The visitor left: nobody to answer.
    if (res.destroyed) return;
    hooks.onFailure(err);
  };

  proxyReq.on('response', (proxyRes: IncomingMessage) => {
    if (settled) {
      proxyRes.destroy();
      return;
    }
    if (res.destroyed) {
      settled = true;
      proxyRes.destroy();
      return;
    }
    const invalid = invalidHead(proxyRes);
    if (invalid !== undefined) {
      proxyRes.destroy();
      proxyReq.destroy();
      fail(invalid);
      return;
    }
    const status = proxyRes.statusCode as number;
    try {
      res.writeHead(status, proxyRes.statusMessage, stripHopByHop(proxyRes.rawHeaders));
    } catch (err) {
      // Node checks every name and value as it writes the head; nothing has left when it throws.
      proxyRes.destroy();
      proxyReq.destroy();
      const reason = err instanceof Error ? err.message : String(err);
      fail(new InvalidUpstreamAnswer('ERR_UPSTREAM_HEAD', `the upstream's response head cannot be passed on: ${reason}`));
      return;
    }
    settled = true;
    relayed = proxyRes;
    hooks.onStatus?.(status);
    proxyRes.on('error', () => res.destroy());
    proxyRes.once('close', () => {
      // The upstream dropped mid-body: the visitor must see a broken response, not a short one.
      if (!proxyRes.complete) res.destroy();
    });
    proxyRes.pipe(res);
  });

  proxyReq.on('error', (err: Error) => {
    // After a complete answer, the error is about bytes that follow it (an app that sends a body with
    // its answer to HEAD): the visitor's answer is whole and is still sent.
    if (relayed?.complete === true) return;
    // After the head: a broken body; close the visitor's connection (a no-op if it already left).
    if (settled) res.destroy();
    else fail(err);
  });

  // Node closes the request without 'response' or 'error' in a few cases (a 101 to a plain request).
  proxyReq.once('close', () => {
    if (settled) return;
    queueMicrotask(() => fail(new InvalidUpstreamAnswer('ERR_UPSTREAM_CLOSED', 'the upstream closed the connection without an answer')));
  });
}

/** Sends an error page, or closes the connection when a head has already left. Never throws. */
export function failResponse(res: ServerResponse, page: Page): void {
  try {
    writePage(res, page);
  } catch {
    res.destroy();
  }
}

/** Why an upstream head must not reach the visitor, or undefined when it may. */
function invalidHead(proxyRes: IncomingMessage): InvalidUpstreamAnswer | undefined {
  const status = proxyRes.statusCode ?? 0;
  if (!Number.isInteger(status) || status < 200 || status > 599) {
    // 1xx answers are interim (Node handles 100/103 itself); a final 1xx, a 101 to a plain request,
    // or a status outside the HTTP range is not an answer a browser can use.
    return new InvalidUpstreamAnswer('ERR_UPSTREAM_STATUS', `the upstream answered with status ${status}`);
  }
  return undefined;
}

/** Headers that describe one connection, never forwarded (RFC 9110 §7.6.1). `proxy-*` is matched by prefix. */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'te', 'trailer', 'transfer-encoding', 'upgrade']);

/**
 * Copies a raw header list without the hop-by-hop headers (also those the Connection header
 * names) and without those in `drop` (lower case).
 */
export function stripHopByHop(rawHeaders: readonly string[], drop: ReadonlySet<string> = new Set()): string[] {
  let named: Set<string> | undefined;
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    if (rawHeaders[i]?.toLowerCase() !== 'connection') continue;
    named ??= new Set();
    for (const token of (rawHeaders[i + 1] ?? '').split(',')) named.add(token.trim().toLowerCase());
  }
  const out: string[] = [];
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    const name = rawHeaders[i] ?? '';
    const lower = name.toLowerCase();
    if (HOP_BY_HOP.has(lower) || drop.has(lower) || named?.has(lower) === true || lower.startsWith('proxy-')) continue;
    out.push(name, rawHeaders[i + 1] ?? '');
  }
  return out;
}

/** Longest upgrade answer head read before it is refused (Node's own limit for a head is 16 KiB). */
const MAX_UPGRADE_HEAD_BYTES = 16 * 1024;
const STATUS_LINE = /^HTTP\/1\.[01] (\d{3})(?: [\t\x20-\x7e\x80-\xff]*)?$/;
const HEADER_LINE = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+:[\t\x20-\x7e\x80-\xff]*$/;

/**
 * Why an upgrade answer's head (up to, not including, the blank line) must not reach the visitor,
 * or undefined: the same rules as for an ordinary answer (an HTTP/1.x status line with a status of
 * 101 or 200–599, header lines Node would accept), since this head is passed on byte for byte.
 */
export function invalidUpgradeHead(head: string): string | undefined {
  const lines = head.split('\r\n');
  const status = STATUS_LINE.exec(lines[0] ?? '');
  if (status === null) return 'the upstream answered the upgrade with something that is not an HTTP/1.x status line';
  const code = Number(status[1]);
  if (code !== 101 && (code < 200 || code > 599)) return `the upstream answered the upgrade with status ${code}`;
  for (const line of lines.slice(1)) {
    if (!HEADER_LINE.test(line)) return 'the upstream answered the upgrade with a malformed header line';
  }
  return undefined;
}

/**
 * Reads an upstream's answer to an upgrade request from `upstream` (paused, as it arrives) until
 * its head is complete, then calls `onHead` with every byte read so far (head and any bytes after
 * it), for the caller to write to the visitor before joining the two sockets. A head that is
 * invalid, larger than 16 KiB, or cut by the upstream's end calls `onInvalid` instead; the caller
 * answers 502. Exactly one of the two is called, unless the upstream errors first (the caller's
 * own 'error' handler answers then).
 */
export function readUpgradeAnswer(
  upstream: Duplex,
  onHead: (status: number, bytes: Buffer) => void,
  onInvalid: (reason: string) => void,
): void {
  const chunks: Buffer[] = [];
  let size = 0;
  let done = false;
  const finish = (): void => {
    done = true;
    upstream.off('data', onData);
    upstream.off('end', onEnd);
    upstream.pause();
  };
  const onData = (chunk: Buffer): void => {
    if (done) return;
    chunks.push(chunk);
    size += chunk.length;
    const bytes = Buffer.concat(chunks, size);
    const end = bytes.indexOf('\r\n\r\n');
    if (end === -1) {
      if (size > MAX_UPGRADE_HEAD_BYTES) {
        finish();
        onInvalid(`the upstream's answer head is larger than ${MAX_UPGRADE_HEAD_BYTES} bytes`);
      }
      return;
    }
    finish();
    const head = bytes.subarray(0, end).toString('latin1');
    const invalid = end > MAX_UPGRADE_HEAD_BYTES ? 'the upstream answer head is too large' : invalidUpgradeHead(head);
    if (invalid !== undefined) onInvalid(invalid);
    else onHead(Number(head.slice(9, 12)), bytes);
  };
  const onEnd = (): void => {
    if (done) return;
    finish();
    onInvalid('the upstream closed the connection without an answer');
  };
  upstream.on('data', onData);
  upstream.once('end', onEnd);
}

/**
 * Sends an upgrade request (`requestHead`, then `head`: the bytes the visitor sent after it) to
 * `upstream`, streams the visitor's further bytes to it, and joins the two once the upstream's
 * answer head is valid: `claim()` is asked first (false: the visitor was answered meanwhile, e.g.
 * on a timeout), then the answer goes to the visitor and the upstream is piped to it. An invalid
 * answer calls `onInvalid` (see {@link readUpgradeAnswer}).
 */
export function joinUpgrade(
  visitor: Duplex,
  upstream: Duplex,
  requestHead: string,
  head: Buffer,
  claim: () => boolean,
  onInvalid: (reason: string) => void,
): void {
  upstream.write(requestHead);
  if (head.length > 0) upstream.write(head);
  visitor.pipe(upstream);
  readUpgradeAnswer(
    upstream,
    (_status, bytes) => {
      if (!claim()) return;
      visitor.write(bytes);
      upstream.pipe(visitor);
    },
    onInvalid,
  );
}
