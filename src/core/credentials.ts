// Credential formats: random tokens, API keys and session tokens, their shapes and SHA-256 digests.
import crypto from 'node:crypto';

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/** `length` base62 characters from the CSPRNG, without modulo bias (rejection sampling). */
export function randomBase62(length: number): string {
  let out = '';
  while (out.length < length) {
    for (const byte of crypto.randomBytes(length * 2)) {
      if (byte < 248) out += BASE62[byte % 62];
      if (out.length === length) break;
    }
  }
  return out;
}

export const API_KEY_PREFIX = 'slw_k1_';
export const SESSION_TOKEN_PREFIX = 'slw_s1_';
/** Length of the random part: 43 base62 characters ≈ 256 bits. */
const RANDOM_LENGTH = 43;

export const newApiKey = (): string => API_KEY_PREFIX + randomBase62(RANDOM_LENGTH);
export const newSessionToken = (): string => SESSION_TOKEN_PREFIX + randomBase62(RANDOM_LENGTH);

/** Well-formed bearer values: the only shapes worth a database lookup. */
export const API_KEY_PATTERN = /^slw_k1_[0-9A-Za-z]{32,128}$/;
export const SESSION_TOKEN_PATTERN = /^slw_s1_[0-9A-Za-z]{32,128}$/;

/** SHA-256 hex digest: how API keys and session tokens are stored. */
export const sha256Hex = (value: string): string => crypto.createHash('sha256').update(value).digest('hex');

/** Constant-time equality of two hex digests. */
export function digestsEqual(a: string, b: string): boolean {
  const left = Buffer.from(a, 'hex');
  const right = Buffer.from(b, 'hex');
  return left.length === right.length && crypto.timingSafeEqual(left, right);
}

/** The credential of an `Authorization: Bearer <token>` header, if well formed (API and tunnels alike). */
export function bearerToken(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  return /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(header)?.[1];
}
