// AES-256-GCM encryption of configuration values at rest, bound to where each value is stored.
import crypto from 'node:crypto';

/** Length of the installation key in bytes (AES-256). */
export const KEY_BYTES = 32;
const IV_BYTES = 12;
const TAG_BYTES = 16;
/** Format marker of every ciphertext this module writes; a later format gets a new one. */
const PREFIX = 'v1:';
/** What the key check value encrypts (the plaintext is public: only the key is secret). */
const CHECK_PLAINTEXT = 'slipway installation key check';
const CHECK_CONTEXT = 'key-check';

/** A ciphertext that the key cannot open: the wrong key, or a tampered or misplaced value. */
export class DecryptionError extends Error {
  override readonly name = 'DecryptionError';
}

/**
 * Encrypts and decrypts strings under one installation key. Each value is bound to a context
 * string (e.g. `env:<deployment id>:<KEY>`) as GCM associated data, so a ciphertext copied to
 * another row or deployment does not decrypt.
 */
export class ValueCipher {
  readonly #key: Buffer;

  constructor(key: Buffer) {
    if (key.length !== KEY_BYTES) throw new TypeError(`the installation key must be ${KEY_BYTES} bytes, got ${key.length}`);
    this.#key = Buffer.from(key);
  }

  /** `v1:` + base64(iv ‖ tag ‖ ciphertext), with a fresh random IV. */
  encrypt(plaintext: string, context: string): string {
    const iv = crypto.randomBytes(IV_BYTES);
    const cipher = crypto.createCipheriv('aes-256-gcm', this.#key, iv);
    cipher.setAAD(Buffer.from(context, 'utf8'));
    const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    return PREFIX + Buffer.concat([iv, cipher.getAuthTag(), body]).toString('base64');
  }

  /** The plaintext of `encrypt(…, context)`; DecryptionError if the key or context does not match. */
  decrypt(value: string, context: string): string {
    if (!value.startsWith(PREFIX)) throw new DecryptionError('not a Slipway ciphertext');
    const raw = Buffer.from(value.slice(PREFIX.length), 'base64');
    if (raw.length < IV_BYTES + TAG_BYTES) throw new DecryptionError('ciphertext too short');
    const decipher = crypto.createDecipheriv('aes-256-gcm', this.#key, raw.subarray(0, IV_BYTES));
    decipher.setAAD(Buffer.from(context, 'utf8'));
    decipher.setAuthTag(raw.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
    try {
      return Buffer.concat([decipher.update(raw.subarray(IV_BYTES + TAG_BYTES)), decipher.final()]).toString('utf8');
    } catch (err) {
      throw new DecryptionError('the value does not decrypt under this key', { cause: err });
    }
  }

  /**
   * A key for another purpose, derived from the installation key (HKDF-SHA256, no salt, `info` naming
   * the purpose): every instance holding the same installation key derives the same one.
   */
  deriveKey(info: string, bytes = KEY_BYTES): Buffer {
    return Buffer.from(crypto.hkdfSync('sha256', this.#key, Buffer.alloc(0), Buffer.from(info, 'utf8'), bytes));
  }

  /** A value stored beside the data that proves, at start, that this is the key that encrypted it. */
  keyCheck(): string {
    return this.encrypt(CHECK_PLAINTEXT, CHECK_CONTEXT);
  }

  /** Whether `check` (from keyCheck) was made with this key. */
  matchesKeyCheck(check: string): boolean {
    try {
      return this.decrypt(check, CHECK_CONTEXT) === CHECK_PLAINTEXT;
    } catch (err) {
      if (err instanceof DecryptionError) return false;
      throw err;
    }
  }
}
