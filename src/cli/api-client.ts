// HTTP client of the Slipway API: JSON requests with timeouts, followed text streams, streamed uploads; failures become CliError.
import { createReadStream } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import { randomBytes } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { CliError, EXIT_INTERRUPTED } from './cli-error.js';

/** Default time limit of one request/answer (followed log streams have none). */
export const DEFAULT_TIMEOUT_MS = 30_000;
/** An upload fails when no byte moves for this long (a big upload may take longer in total). */
export const UPLOAD_IDLE_TIMEOUT_MS = 120_000;

export interface ApiClientOptions {
  /** Server base URL, without a trailing slash. */
  readonly url: string;
  /** Session token or API key; undefined only for login. */
  readonly bearer: string | undefined;
  /** Aborted by Ctrl-C. */
  readonly signal: AbortSignal;
  readonly timeoutMs?: number;
}

export interface RequestOptions {
  body?: unknown;
  timeoutMs?: number;
}

export interface UploadOptions {
  /** The tar.gz file to send as part `archive`. */
  file: string;
  /** Its length in bytes. */
  size: number;
  /** Text sent as part `dockerfile` (written at the deployment's dockerfile_path on the server). */
  dockerfile?: string;
  /** Called with the number of archive bytes sent so far. */
  onProgress?: (sent: number) => void;
}

/** Items the CLI asks for per page of a list (the server's default). */
const LIST_PAGE = 100;

/** `path` with its `limit` query parameter set to `limit`. */
function withLimit(path: string, limit: number): string {
  const at = path.indexOf('?');
  const query = new URLSearchParams(at === -1 ? '' : path.slice(at + 1));
  query.set('limit', String(limit));
  return `${at === -1 ? path : path.slice(0, at)}?${query.toString()}`;
}

/**
 * The path of the `rel="next"` target in a Link header, or undefined. The server sends a
 * path-absolute reference (`/api/v1/…`), taken relative to the server URL the CLI was given; an
 * absolute URL is followed only on that same origin, so the credential never goes elsewhere.
 */
export function nextLink(header: string | null, serverUrl: string): string | undefined {
  if (header === null) return undefined;
  for (const part of header.split(',')) {
    const match = /^\s*<([^>]*)>\s*;(.*)$/.exec(part);
    if (match === null || !/(^|;)\s*rel\s*=\s*"?next"?\s*(;|$)/i.test(match[2] ?? '')) continue;
    const target = match[1] ?? '';
    if (target.startsWith('/') && !target.startsWith('//')) return target;
    const base = new URL(serverUrl);
    const url = new URL(target, base);
    if (url.origin !== base.origin) throw new CliError(`${serverUrl} linked the next page to another server (${url.origin}); not following it`);
    const prefix = base.pathname.replace(/\/$/, '');
    return url.pathname.startsWith(`${prefix}/`) ? url.pathname.slice(prefix.length) + url.search : url.pathname + url.search;
  }
  return undefined;
}

const UNREACHABLE_CODES = new Set([
  'ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'ECONNRESET', 'ETIMEDOUT',
  'EADDRNOTAVAIL', 'UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_SOCKET', 'EPIPE',
]);

/** Talks to one Slipway server with one credential. */
export class ApiClient {
  readonly url: string;
  readonly #bearer: string | undefined;
  readonly #signal: AbortSignal;
  readonly #timeoutMs: number;

  constructor(options: ApiClientOptions) {
    this.url = options.url;
    this.#bearer = options.bearer;
    this.#signal = options.signal;
    this.#timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  }

  /** Sends a request and parses the JSON answer (undefined for 204); non-2xx throws CliError. */
  async request<T>(method: string, path: string, options: RequestOptions = {}): Promise<T> {
    const timeoutMs = options.timeoutMs ?? this.#timeoutMs;
    const signal = AbortSignal.any([this.#signal, AbortSignal.timeout(timeoutMs)]);
    const headers: Record<string, string> = { accept: 'application/json', ...this.#auth() };
    let body: string | undefined;
    if (options.body !== undefined) {
      headers['content-type'] = 'application/json';
      body = JSON.stringify(options.body);
    }
    try {
      const res = await fetch(this.url + path, { method, headers, signal, ...(body === undefined ? {} : { body }) });
      const text = await res.text();
      if (!res.ok) throw errorFromAnswer(res.status, text, this.url);
      if (text === '') return undefined as T;
      return parseJson(text, this.url) as T;
    } catch (err) {
      throw this.#transportError(err, timeoutMs);
    }
  }

  /** Resolves when the server answers at all (any status); throws the transport error otherwise. */
  async reachable(): Promise<void> {
    const signal = AbortSignal.any([this.#signal, AbortSignal.timeout(this.#timeoutMs)]);
    try {
      const res = await fetch(`${this.url}/healthz`, { signal });
      await res.body?.cancel();
    } catch (err) {
      throw this.#transportError(err, this.#timeoutMs);
    }
  }

  /**
   * GETs a whole list (decisions §14): page after page, following the `Link: <…>; rel="next"` the
   * server sends while more items follow; newest first, as the server orders them. `max` cuts the
   * list at that many items (pages of up to 100, the last one asked for only what is missing).
   */
  async list<T>(path: string, options: { max?: number } = {}): Promise<T[]> {
    const items: T[] = [];
    const max = options.max ?? Infinity;
    let next: string | undefined = withLimit(path, Math.min(max, LIST_PAGE));
    while (next !== undefined && items.length < max) {
      const { data, link } = await this.#getPage<T>(next);
      items.push(...data.slice(0, max - items.length));
      const target = nextLink(link, this.url);
      next = target === undefined ? undefined : withLimit(target, Math.min(max - items.length, LIST_PAGE));
    }
    return items;
  }

  async #getPage<T>(path: string): Promise<{ data: T[]; link: string | null }> {
    const signal = AbortSignal.any([this.#signal, AbortSignal.timeout(this.#timeoutMs)]);
    try {
      const res = await fetch(this.url + path, { headers: { accept: 'application/json', ...this.#auth() }, signal });
      const text = await res.text();
      if (!res.ok) throw errorFromAnswer(res.status, text, this.url);
      const data = parseJson(text, this.url);
      if (!Array.isArray(data)) throw new CliError(`${this.url} answered a list request with something other than a list`);
      return { data: data as T[], link: res.headers.get('link') };
    } catch (err) {
      throw this.#transportError(err, this.#timeoutMs);
    }
  }

  /**
   * GETs a text stream (build or container logs). Only the wait for the answer's headers has a
   * time limit: a followed stream lasts as long as the build or container runs. Ctrl-C ends it.
   */
  async *stream(path: string): AsyncGenerator<string> {
    const headersTimeout = new AbortController();
    const timer = setTimeout(() => headersTimeout.abort(new DOMException('timed out', 'TimeoutError')), this.#timeoutMs);
    const signal = AbortSignal.any([this.#signal, headersTimeout.signal]);
    try {
      const res = await fetch(this.url + path, { headers: { accept: 'text/plain', ...this.#auth() }, signal });
      clearTimeout(timer);
      if (!res.ok) throw errorFromAnswer(res.status, await res.text(), this.url);
      if (res.body === null) return;
      const decoder = new TextDecoder();
      for await (const chunk of res.body) {
        const text = decoder.decode(chunk, { stream: true });
        if (text !== '') yield text;
      }
      const rest = decoder.decode();
      if (rest !== '') yield rest;
    } catch (err) {
      throw this.#transportError(err, this.#timeoutMs);
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * POSTs a multipart/form-data body streamed from `options.file` (never held in memory), with a
   * Content-Length so the server can refuse an oversized archive before reading it.
   */
  async upload<T>(path: string, options: UploadOptions): Promise<T> {
    const boundary = `----slipway${randomBytes(12).toString('hex')}`;
    let head = '';
    if (options.dockerfile !== undefined) {
      head += `--${boundary}\r\nContent-Disposition: form-data; name="dockerfile"\r\n\r\n${options.dockerfile}\r\n`;
    }
    head += `--${boundary}\r\nContent-Disposition: form-data; name="archive"; filename="source.tar.gz"\r\nContent-Type: application/gzip\r\n\r\n`;
    const tail = `\r\n--${boundary}--\r\n`;
    const length = Buffer.byteLength(head) + options.size + Buffer.byteLength(tail);
    const target = new URL(this.url + path);
    const transport = target.protocol === 'https:' ? https : http;
    try {
      const res = await new Promise<IncomingMessage>((resolve, reject) => {
        const req = transport.request(target, {
          method: 'POST',
          signal: this.#signal,
          headers: {
            accept: 'application/json',
            'content-type': `multipart/form-data; boundary=${boundary}`,
            'content-length': String(length),
            ...this.#auth(),
          },
        });
        req.setTimeout(UPLOAD_IDLE_TIMEOUT_MS, () => req.destroy(new DOMException('timed out', 'TimeoutError')));
        // An early answer (401, 413) wins over the write error the closed connection then causes.
        req.once('response', resolve);
        // `on`, not `once`: a second error after the first settles must not go unhandled.
        req.on('error', reject);
        req.write(head);
        const file = createReadStream(options.file);
        let sent = 0;
        file.on('data', (chunk) => {
          sent += chunk.length;
          options.onProgress?.(sent);
        });
        file.on('error', (err) => req.destroy(err));
        file.once('end', () => req.end(tail));
        file.pipe(req, { end: false });
      });
      const text = await readAll(res);
      if ((res.statusCode ?? 0) < 200 || (res.statusCode ?? 0) >= 300) throw errorFromAnswer(res.statusCode ?? 0, text, this.url);
      return parseJson(text, this.url) as T;
    } catch (err) {
      throw this.#transportError(err, UPLOAD_IDLE_TIMEOUT_MS);
    }
  }

  #auth(): Record<string, string> {
    return this.#bearer === undefined ? {} : { authorization: `Bearer ${this.#bearer}` };
  }

  #transportError(err: unknown, timeoutMs: number): CliError {
    if (err instanceof CliError) return err;
    if (this.#signal.aborted) return new CliError('interrupted', { exitCode: EXIT_INTERRUPTED });
    if (err instanceof Error && err.name === 'TimeoutError') {
      return new CliError(`Slipway at ${this.url} did not answer within ${Math.round(timeoutMs / 1000)} s: is it overloaded or stuck?`);
    }
    const code = errorCode(err);
    if (code !== undefined && UNREACHABLE_CODES.has(code)) return unreachable(this.url, err);
    if (err instanceof TypeError && err.message === 'fetch failed') return unreachable(this.url, err);
    return new CliError(`request to ${this.url} failed: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
  }
}

function unreachable(url: string, cause: unknown): CliError {
  return new CliError(`cannot reach Slipway at ${url}: is the server running? (npm start)`, { cause });
}

/** The errno-style code of an error or of its cause (fetch wraps socket errors). */
function errorCode(err: unknown): string | undefined {
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 4; e = e.cause, depth++) {
    const code = (e as NodeJS.ErrnoException).code;
    if (typeof code === 'string') return code;
  }
  return undefined;
}

function parseJson(text: string, url: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw new CliError(`${url} answered something that is not JSON: is it a Slipway server?`);
  }
}

/** Turns a non-2xx answer into a one-line CliError carrying the server's message. */
export function errorFromAnswer(status: number, text: string, url: string): CliError {
  let code: string | undefined;
  let message: string | undefined;
  try {
    const body = JSON.parse(text) as { error?: unknown; message?: unknown };
    if (typeof body.error === 'string') code = body.error;
    if (typeof body.message === 'string') message = body.message;
  } catch {
    // Not a Slipway error body: fall back to the status below.
  }
  if (status === 401 && code !== 'invalid_credentials') {
    return new CliError('your login has expired or the key was revoked: run `slipway login`', { status, code: code ?? 'unauthorized' });
  }
  const line = (message ?? `${url} answered HTTP ${status}${code === undefined ? ' (is it a Slipway server?)' : ''}`).replace(/\s*\n\s*/g, ' ');
  return new CliError(line, { status, ...(code === undefined ? {} : { code }) });
}

async function readAll(res: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of res) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}
