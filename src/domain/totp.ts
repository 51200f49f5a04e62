// TOTP (RFC 6238 over RFC 4226's HOTP): secrets in base32, codes checked ±1 time step and each usable once.
import crypto from 'node:crypto';

/** Seconds per time step (RFC 6238's default, what authenticator apps use). */
export const TOTP_STEP_SECONDS = 30;
export const TOTP_DIGITS = 6;
/** Steps of clock skew accepted either side of now. */
const SKEW_STEPS = 1;

const BASE32 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';

/** RFC 4648 base32, without padding (as otpauth:// URLs carry it). */
export function base32Encode(bytes: Uint8Array): string {
  let out = '';
  let bits = 0;
  let value = 0;
  for (const byte of bytes) {
    value = (value << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      out += BASE32[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  if (bits > 0) out += BASE32[(value << (5 - bits)) & 31];
  return out;
}

/** Decodes base32 (case and spaces ignored, padding allowed); throws on other characters. */
export function base32Decode(text: string): Buffer {
  const clean = text.replace(/[\s=]/g, '').toUpperCase();
  const out: number[] = [];
  let bits = 0;
  let value = 0;
  for (const ch of clean) {
    const index = BASE32.indexOf(ch);
    if (index === -1) throw new Error('not base32');
    value = (value << 5) | index;
    bits += 5;
    if (bits >= 8) {
      out.push((value >>> (bits - 8)) & 255);
      bits -= 8;
    }
  }
  return Buffer.from(out);
}

/** RFC 4226 HOTP of `counter` under `key` (HMAC-SHA-1 unless another hash is named), `digits` long. */
export function hotp(key: Uint8Array, counter: number, digits = TOTP_DIGITS, hash: 'sha1' | 'sha256' | 'sha512' = 'sha1'): string {
  const message = Buffer.alloc(8);
  message.writeBigUInt64BE(BigInt(counter));
  const mac = crypto.createHmac(hash, key).update(message).digest();
  const offset = (mac[mac.length - 1] as number) & 0x0f;
  const binary = (mac.readUInt32BE(offset) & 0x7fffffff) % 10 ** digits;
  return String(binary).padStart(digits, '0');
}

/** The time step of a moment (milliseconds since the epoch). */
export const stepAt = (nowMs: number): number => Math.floor(nowMs / 1000 / TOTP_STEP_SECONDS);

/**
 * The step whose code `code` is, within ±1 step of `nowMs` and after `lastStep` (a code already
 * accepted, or an earlier one, never passes again); null when it is none. Compared in constant time.
 */
export function verifyTotp(key: Uint8Array, code: string, nowMs: number, lastStep: number | null): number | null {
  if (!/^[0-9]{6}$/.test(code)) return null;
  const now = stepAt(nowMs);
  let found: number | null = null;
  for (let step = now - SKEW_STEPS; step <= now + SKEW_STEPS; step += 1) {
    const expected = Buffer.from(hotp(key, step));
    if (crypto.timingSafeEqual(expected, Buffer.from(code)) && found === null && (lastStep === null || step > lastStep)) found = step;
  }
  return found;
}

/** A new secret: 160 bits from the CSPRNG (RFC 4226's recommended length). */
export const newTotpSecret = (): Buffer => crypto.randomBytes(20);

/** The `otpauth://totp/…` URL authenticator apps read (from a QR code or pasted). */
export function otpauthUrl(issuer: string, account: string, secret: Uint8Array): string {
  const label = `${encodeURIComponent(issuer)}:${encodeURIComponent(account)}`;
  const query = new URLSearchParams({ secret: base32Encode(secret), issuer, algorithm: 'SHA1', digits: String(TOTP_DIGITS), period: String(TOTP_STEP_SECONDS) });
  return `otpauth://totp/${label}?${query.toString()}`;
}
