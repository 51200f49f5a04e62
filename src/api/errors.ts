// The one place where errors become HTTP: domain codes to statuses, and Fastify's own errors to codes.
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { DomainError, type ErrorCode } from '../core/errors.js';

/** HTTP status of every error code. */
export const STATUS_OF: Record<ErrorCode, number> = {
  validation_error: 400,
  subdomain_taken: 400,
  domain_taken: 400,
  email_taken: 400,
  invalid_password: 400,
  unauthorized: 401,
  invalid_credentials: 401,
  forbidden: 403,
  not_found: 404,
  invalid_state: 409,
  payload_too_large: 413,
  unsupported_media_type: 415,
  rate_limited: 429,
  quota_exceeded: 429,
  build_failed: 500,
  internal_error: 500,
  unavailable: 503,
};

/** The error body of every failure. */
export interface ErrorBody {
  error: ErrorCode;
  message: string;
}

interface AjvError {
  keyword: string;
  instancePath: string;
  message?: string;
  params: Record<string, unknown>;
}

/** A readable sentence from schema validation errors (unknown fields named). */
function describeValidation(errors: AjvError[], context: string | undefined): string {
  const unknown = errors.filter((e) => e.keyword === 'additionalProperties').map((e) => String(e.params['additionalProperty']));
  if (unknown.length > 0) return `unknown field${unknown.length > 1 ? 's' : ''}: ${[...new Set(unknown)].join(', ')}`;
  const first = errors[0];
  if (first === undefined) return 'invalid request';
  const where = first.instancePath.replace(/^\//, '').replaceAll('/', '.');
  if (first.keyword === 'required') return `${String(first.params['missingProperty'])} is required`;
  const subject = where === '' ? (context === 'body' ? 'body' : (context ?? 'request')) : where;
  return `${subject} ${first.message ?? 'is invalid'}`;
}

/** Maps any thrown value to a status and an `{error, message}` body. */
export function toErrorResponse(err: unknown): { status: number; body: ErrorBody; retryAfter?: number; internal: boolean } {
  if (err instanceof DomainError) {
    const retryAfter = err.retryAfterSeconds;
    return {
      status: STATUS_OF[err.code],
      body: { error: err.code, message: err.message },
      ...(retryAfter === undefined ? {} : { retryAfter }),
      internal: false,
    };
  }
  const fe = err as Partial<FastifyError> & { validation?: AjvError[]; validationContext?: string };
  if (Array.isArray(fe.validation)) {
    return { status: 400, body: { error: 'validation_error', message: describeValidation(fe.validation, fe.validationContext) }, internal: false };
  }
  switch (fe.code) {
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
    case 'FST_INVALID_MULTIPART_CONTENT_TYPE':
      return { status: 415, body: { error: 'unsupported_media_type', message: 'unsupported Content-Type for this endpoint' }, internal: false };
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
    case 'FST_REQ_FILE_TOO_LARGE':
      return { status: 413, body: { error: 'payload_too_large', message: 'request body is too large' }, internal: false };
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return { status: 400, body: { error: 'validation_error', message: 'a JSON body is required' }, internal: false };
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return { status: 400, body: { error: 'validation_error', message: 'malformed JSON body' }, internal: false };
    // Router errors, raised before any route runs (see frameworkErrors in app.ts).
    case 'FST_ERR_BAD_URL':
      return { status: 400, body: { error: 'validation_error', message: 'malformed URL (bad percent-encoding)' }, internal: false };
    case 'FST_ERR_MAX_PARAM_LENGTH':
      // An over-long path parameter is not a UUID, so it names nothing: the same 404 as any other non-UUID id.
      return { status: 404, body: { error: 'not_found', message: 'not found' }, internal: false };
    default:
      break;
  }
  if (err instanceof SyntaxError && fe.statusCode === 400) {
    return { status: 400, body: { error: 'validation_error', message: 'malformed JSON body' }, internal: false };
  }
  const unreachable = databaseUnreachable(err);
  if (unreachable !== undefined) return { status: 503, body: { error: 'unavailable', message: `the database is unreachable (${unreachable})` }, internal: false };
  const status = typeof fe.statusCode === 'number' ? fe.statusCode : 500;
  if (status >= 400 && status < 500) {
    // Fastify, busboy and plugin client errors (bad multipart framing, limits, bad headers).
    const byStatus: Partial<Record<number, ErrorCode>> = { 404: 'not_found', 413: 'payload_too_large', 415: 'unsupported_media_type', 429: 'rate_limited' };
    const code = byStatus[status] ?? 'validation_error';
    return { status: STATUS_OF[code], body: { error: code, message: safeClientMessage(fe.message) }, internal: false };
  }
  return { status: 500, body: { error: 'internal_error', message: 'internal error' }, internal: true };
}

/** Errors of a PostgreSQL server that cannot be reached (or went away): the reason, else undefined. */
function databaseUnreachable(err: unknown): string | undefined {
  if (typeof err !== 'object' || err === null) return undefined;
  const { code, message, port } = err as { code?: unknown; message?: unknown; port?: unknown };
  const text = typeof message === 'string' ? message : '';
  // A socket error of a TCP connection (the engine's Unix socket has no port): PostgreSQL's.
  const socketError = typeof port === 'number' && typeof code === 'string' && ['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH'].includes(code);
  if (socketError || (typeof code === 'string' && /^(08|57P0)/.test(code))) return text === '' ? String(code) : text;
  if (/^Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error/.test(text)) return text;
  if (err instanceof AggregateError) return err.errors.map((e) => databaseUnreachable(e)).find((r) => r !== undefined);
  return undefined;
}

function safeClientMessage(message: string | undefined): string {
  if (message === undefined || message === '') return 'bad request';
  // Client-error messages from parsers are short and carry no secrets; cap them anyway.
  return message.replace(/^FST_[A-Z_]+: /, '').slice(0, 300);
}

/** Where internal errors are logged, with their detail (never sent to the client). */
export type ErrorLog = (level: 'error', msg: string, detail?: object) => void;

/** Sends an error as `{error, message}` with the right status and headers. */
export function sendError(reply: FastifyReply, err: unknown, request?: FastifyRequest, log?: ErrorLog): FastifyReply {
  const response = toErrorResponse(err);
  // A client that went away aborts the work its request started (engine calls, a stats sample):
  // that abort is the client's doing, not Slipway's, and nobody is left to answer.
  if (response.internal && isAbort(err) && clientGone(reply)) return reply.code(499 as number).send();
  if (response.internal) {
    const where = request === undefined ? '' : ` on ${request.method} ${request.url.split('?')[0] ?? ''}`;
    if (log !== undefined) log('error', `internal error${where}`, { error: err });
    else request?.log.error({ err }, 'internal error');
  }
  if (response.status === 401) void reply.header('WWW-Authenticate', 'Bearer');
  if (response.retryAfter !== undefined) void reply.header('Retry-After', String(response.retryAfter));
  return reply.code(response.status).type('application/json; charset=utf-8').send(response.body);
}

function isAbort(err: unknown): boolean {
  return err instanceof Error && (err.name === 'AbortError' || (err as NodeJS.ErrnoException).code === 'ABORT_ERR');
}

/** Whether the request's connection has closed before its answer was written. */
function clientGone(reply: FastifyReply): boolean {
  const socket = reply.raw.socket;
  return reply.raw.destroyed || socket === null || socket.destroyed;
}

/** Installs the error and not-found handlers: every failure becomes `{error, message}`, never a stack. */
export function installErrorHandlers(app: FastifyInstance, log?: ErrorLog): void {
  app.setErrorHandler((err, request, reply) => sendError(reply, err, request, log));
  app.setNotFoundHandler((request, reply) =>
    sendError(reply, new DomainError('not_found', `no route for ${request.method} ${request.url.split('?')[0] ?? ''}`), request, log),
  );
}
