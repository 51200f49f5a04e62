// Key rotation: re-encrypt everything under a new installation key, crash-safe at every step.
import fs from 'node:fs';
import path from 'node:path';
import { ConfigError } from '../config.js';
import { KEY_FILE, NEW_KEY_FILE, newKeyText, parseKey, writeKeyFile } from './installation-key.js';
import type { UnlockedInstallation } from './unlock.js';
import { ValueCipher } from './value-cipher.js';

export interface RotateOptions {
  readonly unlocked: UnlockedInstallation;
  readonly dataDir: string;
  /** The new key (SLIPWAY_NEW_SECRET_KEY); required when the current one is SLIPWAY_SECRET_KEY. */
  readonly newKey: Buffer | undefined;
  /** Re-encrypts every stored value from one cipher to the other in one transaction; returns the count. */
  readonly reencrypt: (from: ValueCipher, to: ValueCipher) => Promise<number>;
}

/**
 * Moves the installation to a new key. With a key file, the new key is first written beside it
 * (`secret.key.new`, mode 0600), then the database is re-encrypted in one transaction, then the
 * new file replaces the old; a start after a crash at any point finds the key that opens the
 * database (see unlockInstallation). With SLIPWAY_SECRET_KEY, the operator supplies the new key
 * and sets it before the next start.
 */
export async function rotateInstallationKey(options: RotateOptions): Promise<{ count: number; where: string }> {
  const { unlocked } = options;
  if (unlocked.source.kind === 'env') {
    if (options.newKey === undefined) {
      throw new ConfigError('the key is SLIPWAY_SECRET_KEY: set SLIPWAY_NEW_SECRET_KEY to the new key (`openssl rand -base64 32`) and run again');
    }
    const count = await options.reencrypt(unlocked.cipher, new ValueCipher(options.newKey));
    return { count, where: 'set SLIPWAY_SECRET_KEY to the value of SLIPWAY_NEW_SECRET_KEY before the next start' };
  }
  const file = path.join(options.dataDir, KEY_FILE);
  const pending = path.join(options.dataDir, NEW_KEY_FILE);
  const text = options.newKey === undefined ? newKeyText() : options.newKey.toString('base64');
  writeKeyFile(pending, text);
  const count = await options.reencrypt(unlocked.cipher, new ValueCipher(parseKey(text, pending)));
  fs.renameSync(pending, file);
  return { count, where: `${file} holds the new key` };
}
