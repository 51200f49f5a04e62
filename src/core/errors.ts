// Domain errors: a stable code and a human message, no HTTP status (the API layer maps codes).

/** Every error code the domain may raise. The API layer maps each to an HTTP status. */
export type ErrorCode =
  | 'unauthorized'
  | 'invalid_credentials'
  | 'forbidden'
  | 'not_found'
  | 'validation_error'
  | 'email_taken'
  | 'subdomain_taken'
  | 'domain_taken'
  | 'invalid_password'
  | 'invalid_state'
  | 'payload_too_large'
  | 'unsupported_media_type'
  | 'rate_limited'
  | 'quota_exceeded'
  | 'build_failed'
  /** A part the server depends on (the database) does not answer now. */
  | 'unavailable'
  | 'internal_error';

/** An expected failure with a stable code; its message is safe to show to the caller. */
export class DomainError extends Error {
  readonly code: ErrorCode;
  /** Seconds the caller should wait before retrying (rate limits only). */
  readonly retryAfterSeconds: number | undefined;

  constructor(code: ErrorCode, message: string, options?: { retryAfterSeconds?: number; cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'DomainError';
    this.code = code;
    this.retryAfterSeconds = options?.retryAfterSeconds;
  }
}

export const isDomainError = (err: unknown): err is DomainError => err instanceof DomainError;
