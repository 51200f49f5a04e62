// Pages of a list (decisions §14): `?limit` and `?cursor`, opaque sealed cursors, and the `Link: rel="next"` header.
import crypto from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Type, type Static } from '@sinclair/typebox';
import { DomainError } from '../core/errors.js';
import type { PageRequest, Position } from '../core/page.js';
import type { CachedPage } from './page-cache.js';

export const DEFAULT_LIMIT = 100;
export const MAX_LIMIT = 500;

/** Longest cursor accepted (ours are under 200 characters; anything longer is not one). */
const MAX_CURSOR_LENGTH = 512;

/**
 * The query of every list. Query strings are text (nothing is coerced, see schemas.ts), so `limit`
 * is a pattern for 1–500; a repeated parameter arrives as an array and fails the schema. Other
 * parameters are allowed and kept in the `next` link.
 */
export const PageQuery = Type.Object({
  limit: Type.Optional(
    Type.String({
      pattern: '^(?:[1-9][0-9]?|[1-4][0-9]{2}|500)$',
      description: `how many items to return, 1–${MAX_LIMIT} (default ${DEFAULT_LIMIT})`,
    }),
  ),
  cursor: Type.Optional(
    Type.String({
      minLength: 1,
      maxLength: MAX_CURSOR_LENGTH,
      pattern: '^[A-Za-z0-9_-]+$',
      description: 'opaque: the `cursor` of the previous answer\'s `Link: rel="next"`; only valid on the list, and for the caller, that issued it',
    }),
  ),
});
export type PageQuery = Static<typeof PageQuery>;

/** The `Link` header of a list answer, for the OpenAPI document. */
export const PAGE_HEADERS = {
  Link: {
    type: 'string',
    description:
      'present when more items follow: `</api/v1/…?cursor=…&limit=N>; rel="next"`, a path-absolute reference ' +
      '(resolve it against the URL of the request), with the request\'s other query parameters kept',
  },
} as const;

/** The 304 of a list that answers `If-None-Match`, for the OpenAPI document. */
export const NOT_MODIFIED = {
  description: 'the `If-None-Match` header named the current page\'s `ETag`: the page is unchanged (no body)',
  type: 'null',
} as const;

/** The headers of a list answered from serialized pages (`sendSerializedPage`), for the OpenAPI document. */
export const CACHED_PAGE_HEADERS = {
  ...PAGE_HEADERS,
  ETag: { type: 'string', description: 'names this page for this caller; send it back in `If-None-Match` to get 304 while the page is unchanged' },
  'Cache-Control': { type: 'string', description: '`private, no-cache`: a client may keep the page but must ask again before using it' },
} as const;

/** A response schema of a list: the array, documented with its `Link` header (or `headers`). */
export const listResponse = <T extends object, H extends object = typeof PAGE_HEADERS>(items: T, headers?: H): T & { headers: H } => ({
  ...items,
  headers: headers ?? (PAGE_HEADERS as unknown as H),
});

/** Seals and opens cursors: authenticated encryption bound to a context (the installation's ValueCipher). */
export interface CursorSeal {
  encrypt(plaintext: string, context: string): string;
  decrypt(value: string, context: string): string;
}

/**
 * Cursors are the position of a page's last item, sealed (AES-GCM under the installation key) with
 * the list and its owner as associated data: a client cannot read, forge or alter one, and a cursor
 * of another list or another user does not open (400, like garbage). They outlive restarts, not a
 * key rotation.
 */
export class ListCursors {
  readonly #seal: CursorSeal;

  constructor(seal: CursorSeal) {
    this.#seal = seal;
  }

  /** The cursor of `position` in list `list` of `scope` (e.g. `deployments`, the caller's user id). */
  seal(list: string, scope: string, position: Position): string {
    const sealed = this.#seal.encrypt(JSON.stringify(position), `cursor:${list}:${scope}`);
    // `v1:` + base64 → base64url without padding: safe in a query string as it is.
    return Buffer.from(sealed.slice(sealed.indexOf(':') + 1), 'base64').toString('base64url');
  }

  /** The position in a cursor of this list and scope, checked by `valid`; otherwise 400 validation_error. */
  open<P extends Position>(list: string, scope: string, cursor: string, valid: (position: unknown) => position is P): P {
    let position: unknown;
    try {
      position = JSON.parse(this.#seal.decrypt(`v1:${Buffer.from(cursor, 'base64url').toString('base64')}`, `cursor:${list}:${scope}`));
    } catch {
      position = undefined;
    }
    if (!valid(position)) throw new DomainError('validation_error', 'cursor is not valid for this list (take it from the previous page\'s Link header)');
    return position;
  }
}

/** One list as the API serves it: its path (for the `next` link), its name and owner (what binds a cursor). */
export interface ListRef<P extends Position> {
  readonly cursors: ListCursors;
  /** Path-absolute URL of the list, e.g. `/api/v1/deployments`. */
  readonly path: string;
  /** The list's kind, e.g. `deployments`. */
  readonly list: string;
  /** Whose list: the caller's user id, and the deployment for builds. */
  readonly scope: string;
  readonly valid: (position: unknown) => position is P;
}

/** The page a request asks for; a cursor that does not open for this list and caller is 400 validation_error. */
export function pageRequest<P extends Position>(ref: ListRef<P>, query: PageQuery): PageRequest<P> {
  return {
    limit: query.limit === undefined ? DEFAULT_LIMIT : Number(query.limit),
    after: query.cursor === undefined ? undefined : ref.cursors.open(ref.list, ref.scope, query.cursor, ref.valid),
  };
}

/**
 * The `Link` header of a page when more items follow: `<path?…&cursor=…&limit=N>; rel="next"`. The
 * link is path-absolute (no scheme or host): a client resolves it against the URL it called,
 * whatever name or proxy it reached the API through. The request's other query parameters are kept.
 */
export function nextLink<P extends Position>(request: FastifyRequest, ref: ListRef<P>, page: PageRequest<P>, next: P | undefined): string | undefined {
  if (next === undefined) return undefined;
  const at = request.url.indexOf('?');
  const query = new URLSearchParams(at === -1 ? '' : request.url.slice(at + 1));
  query.delete('cursor');
  query.delete('limit');
  query.append('cursor', ref.cursors.seal(ref.list, ref.scope, next));
  query.append('limit', String(page.limit));
  return `<${ref.path}?${query.toString()}>; rel="next"`;
}

/** Answers a page: its items as the body, and the `next` link when more follow. */
export function sendPage<T, P extends Position>(request: FastifyRequest, reply: FastifyReply, ref: ListRef<P>, page: PageRequest<P>, items: T[], next: P | undefined): T[] {
  const link = nextLink(request, ref, page, next);
  if (link !== undefined) void reply.header('link', link);
  return items;
}

/**
 * A page ready to send: its items as the route's response schema writes them (the bytes Fastify
 * would send), its `next` link, and an entity tag: a digest of the caller's scope and the bytes,
 * so a tag names one answer to one caller.
 */
export function serializedPage(reply: FastifyReply, scope: string, items: unknown[], link: string | undefined): CachedPage {
  const text = reply.serialize(items);
  const body = typeof text === 'string' ? Buffer.from(text, 'utf8') : Buffer.from(text as ArrayBuffer);
  const etag = `"${crypto.createHash('sha256').update(scope).update('\0').update(body).digest('base64url').slice(0, 27)}"`;
  return { body, link, etag };
}

/** Whether an `If-None-Match` header names `etag` (weak comparison, as RFC 9110 asks for it), or is `*`. */
export function noneMatchHits(header: string | undefined, etag: string): boolean {
  if (header === undefined) return false;
  return header.split(',').some((tag) => {
    const t = tag.trim();
    return t === '*' || (t.startsWith('W/') ? t.slice(2) : t) === etag;
  });
}

/**
 * Answers a serialized page: 304 without a body when the request's `If-None-Match` names its tag,
 * else the bytes as they are (no second serialization, no encoding of text per request). Either
 * way with its `ETag` and `Link`; `Cache-Control: private, no-cache` lets a browser keep it but
 * never use it without asking again.
 */
export function sendSerializedPage(request: FastifyRequest, reply: FastifyReply, page: CachedPage): FastifyReply {
  void reply.header('etag', page.etag).header('cache-control', 'private, no-cache');
  if (page.link !== undefined) void reply.header('link', page.link);
  if (noneMatchHits(request.headers['if-none-match'], page.etag)) return reply.code(304).send();
  return reply.type('application/json; charset=utf-8').send(page.body);
}

/** Position validators: one sequence number, or a (created_at, id) pair. */
export const isSeqPosition = (p: unknown): p is readonly [number] => Array.isArray(p) && p.length === 1 && Number.isSafeInteger(p[0]) && (p[0] as number) > 0;
export const isTimeIdPosition = (p: unknown): p is readonly [string, string] =>
  Array.isArray(p) && p.length === 2 && typeof p[0] === 'string' && typeof p[1] === 'string' && p[0].length <= 64 && p[1].length <= 64;
