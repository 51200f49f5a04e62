// Password hashing (scrypt) and constant-time verification.
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
const STANDARD = { N: 2 ** 15, r: 8, p: 3 } as const;
// SLIPWAY_INSECURE_FAST_PASSWORD_HASHING (test suites only): 1/96 of the work, so hundreds of
// throwaway accounts do not spend minutes of CPU. Hashes name their parameters: either verifies.
const FAST_FOR_TESTS = { N: 2 ** 10, r: 8, p: 1 } as const;
const KEYLEN = 32;
const SCRYPT_MAXMEM = 256 * 1024 * 1024;

let SCRYPT: { readonly N: number; readonly r: number; readonly p: number } = STANDARD;

/** Chooses the cost of new hashes for the whole process (a server sets it from its configuration as it starts; in a process with several servers, the last one started decides). */
export function useFastPasswordHashing(fast: boolean): void {
  const chosen = fast ? FAST_FOR_TESTS : STANDARD;
  if (chosen === SCRYPT) return;
  SCRYPT = chosen;
  dummyHash = undefined;
}

/** Hashes a password as `scrypt$N$r$p$salt$hash` (base64 parts), so parameters can change later. */
export async function hashPassword(password: string): Promise<string> {
  const salt = crypto.randomBytes(16);
  const hash = await scrypt(password, salt, KEYLEN, { N: SCRYPT.N, r: SCRYPT.r, p: SCRYPT.p, maxmem: SCRYPT_MAXMEM });
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
