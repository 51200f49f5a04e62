// The installation key: SLIPWAY_SECRET_KEY, or one generated once into <data>/secret.key (mode 0600).
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { ConfigError } from '../config.js';
import { KEY_BYTES } from './value-cipher.js';

/** File name of the generated key inside the data directory. */
export const KEY_FILE = 'secret.key';
/** A new key written by `slipway server rotate-key` before the database is re-encrypted. */
export const NEW_KEY_FILE = 'secret.key.new';

/** Where the key came from: the environment, or a file under the data directory. */
export type KeySource = { kind: 'env' } | { kind: 'file'; file: string };

export interface InstallationKey {
  readonly key: Buffer;
  readonly source: KeySource;
}

/** Parses a base64 key of exactly 32 bytes; `what` names it in the error. */
export function parseKey(text: string, what: string): Buffer {
  const trimmed = text.trim();
  const key = Buffer.from(trimmed, 'base64');
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(trimmed) || key.length !== KEY_BYTES) {
    throw new ConfigError(`${what} must be ${KEY_BYTES} random bytes in base64 (e.g. the output of \`openssl rand -base64 32\`)`);
  }
  return key;
}

/** A fresh random key in the base64 form the key file and SLIPWAY_SECRET_KEY hold. */
export const newKeyText = (): string => crypto.randomBytes(KEY_BYTES).toString('base64');

/**
 * Reads the key file `file` (mode 0600 enforced), or creates it with a new random key when it does
 * not exist. Creation is exclusive, so two processes starting at once end up with the same key.
 */
export function loadOrCreateKeyFile(file: string): Buffer {
  fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  try {
    fs.writeFileSync(file, `${newKeyText()}\n`, { mode: 0o600, flag: 'wx' });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
  return readKeyFile(file);
}

/** Reads a key file; tightens its mode to 0600 if others could read it. */
export function readKeyFile(file: string): Buffer {
  const stat = fs.statSync(file);
  if ((stat.mode & 0o077) !== 0) fs.chmodSync(file, 0o600);
  return parseKey(fs.readFileSync(file, 'utf8'), file);
}

/** Writes a key file atomically with mode 0600 (temporary file, fsync, rename). */
export function writeKeyFile(file: string, keyText: string): void {
  const tmp = `${file}.${crypto.randomBytes(6).toString('hex')}.tmp`;
  const fd = fs.openSync(tmp, 'wx', 0o600);
  try {
    fs.writeSync(fd, `${keyText}\n`);
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
  fs.renameSync(tmp, file);
}

/** The installation key: the configured one (SLIPWAY_SECRET_KEY), else `<dataDir>/secret.key`. */
export function loadInstallationKey(configured: Buffer | undefined, dataDir: string): InstallationKey {
  if (configured !== undefined) return { key: configured, source: { kind: 'env' } };
  const file = path.join(dataDir, KEY_FILE);
  return { key: loadOrCreateKeyFile(file), source: { kind: 'file', file } };
}
