// Secret material: password hashing (scrypt), random tokens and API keys, and their SHA-256 digests.
import crypto from 'node:crypto';
import { promisify } from 'node:util';

const scrypt = promisify(crypto.scrypt) as (
  password: string,
  salt: Buffer,
  keylen: number,
  options: crypto.ScryptOptions,
) => Promise<Buffer>;

// OWASP Password Storage Cheat Sheet lists equivalent scrypt settings; N=2^15, r=8, p=3 costs the
// same work as N=2^17, p=1 with 32 MiB of memory per hash instead of 128 MiB, which keeps the
// server's footprint small while several logins run at once.
const SCRYPT = { N: 2 ** 15, r: 8, p: 3, keylen: 32 } as const;
const SCRYPT_MAXMEM = 256 * 1024 * 1024;

/** Hashes a password as `scrypt$N$r$p$salt$hash` (base64 parts), so parameters can change later. */
export async function hashPassword(password: string): Promise<string> {
  const salt = crypto.randomBytes(16);
  const hash = await scrypt(password, salt, SCRYPT.keylen, { N: SCRYPT.N, r: SCRYPT.r, p: SCRYPT.p, maxmem: SCRYPT_MAXMEM });
  return ['scrypt', SCRYPT.N, SCRYPT.r, SCRYPT.p, salt.toString('base64'), hash.toString('base64')].join('$');
}

/** Checks a password against a stored hash in constant time. A malformed stored hash never matches. */
export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const [scheme, n, r, p, saltB64, hashB64] = stored.split('$');
  if (scheme !== 'scrypt' || n === undefined || r === undefined || p === undefined || saltB64 === undefined || hashB64 === undefined) {
    return false;
  }
  const expected = Buffer.from(hashB64, 'base64');
  const actual = await scrypt(password, Buffer.from(saltB64, 'base64'), expected.length, {
    N: Number(n),
    r: Number(r),
    p: Number(p),
    maxmem: SCRYPT_MAXMEM,
  });
  return crypto.timingSafeEqual(actual, expected);
}

/** A hash computed on every failed lookup, so an unknown e-mail costs as much time as a wrong password. */
let dummyHash: Promise<string> | undefined;
export function dummyPasswordHash(): Promise<string> {
  dummyHash ??= hashPassword(crypto.randomBytes(16).toString('hex'));
  return dummyHash;
}

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
