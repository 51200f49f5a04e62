// An outgoing HTTP POST to an address a tenant chose: every hop's address checked after DNS resolution and pinned, redirects followed by hand, time- and size-limited.
import dns from 'node:dns/promises';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import { isPrivateAddress } from '../core/private-address.js';

/** The hint every refusal ends with: how an operator who means it allows private targets. */
export const PRIVATE_TARGETS_HINT = 'a server that should reach such addresses is started with SLIPWAY_ALLOW_PRIVATE_TARGETS=true';

/** What addresses an outgoing request may reach. */
export interface TargetPolicy {
  /** SLIPWAY_ALLOW_PRIVATE_TARGETS: every address allowed. */
  readonly allowPrivate: boolean;
  /** The refusal rule (default: loopback, private, link-local, metadata and reserved addresses, src/core/private-address.ts). */
  readonly isForbidden?: (address: string) => boolean;
  /** DNS resolution (default: the system resolver, every address of the name). */
  readonly resolve?: (hostname: string) => Promise<Array<{ address: string; family: number }>>;
}

/** A target the policy refuses: the message names the rule and the address. */
export class ForbiddenTargetError extends Error {
  override readonly name = 'ForbiddenTargetError';
}

export interface PostOptions {
  readonly headers: Record<string, string>;
  readonly body: Buffer;
  readonly policy: TargetPolicy;
  /** The whole exchange, redirects included. */
  readonly timeoutMs: number;
  /** Bytes of the answer kept; the rest is not read. */
  readonly maxResponseBytes: number;
  readonly maxRedirects: number;
  readonly signal?: AbortSignal | undefined;
}

export interface PostAnswer {
  readonly status: number;
  /** The start of the answer's body (at most `maxResponseBytes`), as text. */
  readonly body: string;
}

const systemResolve = async (hostname: string): Promise<Array<{ address: string; family: number }>> => dns.lookup(hostname, { all: true, verbatim: true });

/** The hostname of a URL without IPv6 brackets. */
const bareHost = (url: URL): string => url.hostname.replace(/^\[(.*)\]$/, '$1');

/**
 * Resolves the URL's host and returns the address to connect to; throws ForbiddenTargetError when
 * any of its addresses is one the policy refuses (a name with one public and one private address
 * is refused: the client could be sent to either).
 */
export async function checkTarget(url: URL, policy: TargetPolicy): Promise<{ address: string; family: number }> {
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new ForbiddenTargetError(`only http:// and https:// URLs are allowed, got ${url.protocol}//`);
  const host = bareHost(url);
  const literal = net.isIP(host);
  const addresses = literal !== 0 ? [{ address: host, family: literal }] : await (policy.resolve ?? systemResolve)(host);
  const first = addresses[0];
  if (first === undefined) throw new Error(`${host} has no address`);
  if (!policy.allowPrivate) {
    const forbidden = policy.isForbidden ?? isPrivateAddress;
    const refused = addresses.find((a) => forbidden(a.address));
    if (refused !== undefined) {
      throw new ForbiddenTargetError(`${host} resolves to ${refused.address}: notification targets may not be loopback, private, link-local or metadata addresses (${PRIVATE_TARGETS_HINT})`);
    }
  }
  return first;
}

/** POSTs `body` to `target`, following up to `maxRedirects` redirects, each checked again. */
export async function postChecked(target: string, options: PostOptions): Promise<PostAnswer> {
  const signal = options.signal === undefined ? AbortSignal.timeout(options.timeoutMs) : AbortSignal.any([options.signal, AbortSignal.timeout(options.timeoutMs)]);
  let url = new URL(target);
  let method: 'POST' | 'GET' = 'POST';
  for (let hop = 0; ; hop++) {
    const pinned = await checkTarget(url, options.policy);
    signal.throwIfAborted();
    const answer = await once(url, pinned, method, options, signal);
    if (answer.location === undefined) return { status: answer.status, body: answer.body };
    if (hop >= options.maxRedirects) throw new Error(`more than ${options.maxRedirects} redirects`);
    url = new URL(answer.location, url);
    // As browsers do: 307 and 308 repeat the POST; 301, 302 and 303 continue with a GET.
    if (answer.status !== 307 && answer.status !== 308) method = 'GET';
  }
}

/** One request to the pinned address; a redirect's Location is returned, not followed. */
function once(url: URL, pinned: { address: string; family: number }, method: 'POST' | 'GET', options: PostOptions, signal: AbortSignal): Promise<{ status: number; body: string; location?: string }> {
  return new Promise((resolve, reject) => {
    const client = url.protocol === 'https:' ? https : http;
    const body = method === 'POST' ? options.body : Buffer.alloc(0);
    const req = client.request(
      url,
      {
        method,
        signal,
        headers: { ...(method === 'POST' ? options.headers : {}), 'content-length': String(body.length), 'user-agent': 'Slipway-Notifications', connection: 'close' },
        // The connection goes to the address just checked, whatever the name resolves to a moment later.
        lookup: (_hostname, lookupOptions, callback) => {
          if ((lookupOptions as { all?: boolean }).all === true) (callback as (err: null, addresses: Array<{ address: string; family: number }>) => void)(null, [pinned]);
          else callback(null, pinned.address, pinned.family);
        },
        agent: false,
      },
      (res) => {
        const status = res.statusCode ?? 0;
        const location = res.headers.location;
        if (status >= 300 && status < 400 && location !== undefined) {
          res.destroy();
          resolve({ status, body: '', location });
          return;
        }
        const chunks: Buffer[] = [];
        let size = 0;
        const done = (): void => resolve({ status, body: Buffer.concat(chunks).toString('utf8') });
        res.on('data', (chunk: Buffer) => {
          if (size >= options.maxResponseBytes) return;
          const room = options.maxResponseBytes - size;
          chunks.push(chunk.length > room ? chunk.subarray(0, room) : chunk);
          size += Math.min(chunk.length, room);
          // Enough of it: the rest is never read.
          if (size >= options.maxResponseBytes) {
            done();
            res.destroy();
          }
        });
        res.on('end', done);
        res.on('error', (err) => (size >= options.maxResponseBytes ? done() : reject(err)));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}
