// Start-up: find the installation key, prove it opens what is stored, and recover an interrupted rotation.
import fs from 'node:fs';
import path from 'node:path';
import { ConfigError } from '../config.js';
import { KEY_FILE, NEW_KEY_FILE, loadOrCreateKeyFile, readKeyFile, type KeySource } from './installation-key.js';
import { ValueCipher } from './value-cipher.js';

/** Where the key check value is kept (the database). */
export interface KeyCheckStore {
  read(): Promise<string | null>;
  write(check: string): Promise<void>;
}

export interface UnlockedInstallation {
  readonly cipher: ValueCipher;
  readonly source: KeySource;
}

/**
 * The installation's cipher. The key is SLIPWAY_SECRET_KEY when set (`configured`), else
 * `<dataDir>/secret.key`, generated on the first start. A key that does not open the stored key
 * check value stops the start with a ConfigError saying what to restore; nothing is generated
 * over a missing key file while encrypted values exist.
 */
export async function unlockInstallation(configured: Buffer | undefined, dataDir: string, checks: KeyCheckStore): Promise<UnlockedInstallation> {
  const stored = await checks.read();
  if (configured !== undefined) {
    const cipher = new ValueCipher(configured);
    if (stored === null) await checks.write(cipher.keyCheck());
    else if (!cipher.matchesKeyCheck(stored)) {
      throw new ConfigError(
        "SLIPWAY_SECRET_KEY is not the key this installation's app configuration was encrypted with: " +
          'set it back to the original key (or unset it if the key was kept in the data directory\'s secret.key)',
      );
    }
    return { cipher, source: { kind: 'env' } };
  }

  const file = path.join(dataDir, KEY_FILE);
  const pending = path.join(dataDir, NEW_KEY_FILE);
  if (stored === null) {
    // Nothing is encrypted yet: a key file from an unfinished rotation has nothing to open.
    fs.rmSync(pending, { force: true });
    const cipher = new ValueCipher(loadOrCreateKeyFile(file));
    await checks.write(cipher.keyCheck());
    return { cipher, source: { kind: 'file', file } };
  }
  if (fs.existsSync(file)) {
    const cipher = new ValueCipher(readKeyFile(file));
    if (cipher.matchesKeyCheck(stored)) {
      // A rotation stopped before the database moved to the new key: the old key is still right.
      fs.rmSync(pending, { force: true });
      return { cipher, source: { kind: 'file', file } };
    }
  }
  if (fs.existsSync(pending)) {
    // A rotation stopped after the database moved to the new key but before the file was renamed.
    const cipher = new ValueCipher(readKeyFile(pending));
    if (cipher.matchesKeyCheck(stored)) {
      fs.renameSync(pending, file);
      return { cipher, source: { kind: 'file', file } };
    }
  }
  if (!fs.existsSync(file)) {
    throw new ConfigError(
      `the installation key ${file} is missing, but the database holds app configuration encrypted with it: ` +
        'restore the file from a backup (or set SLIPWAY_SECRET_KEY to the key)',
    );
  }
  throw new ConfigError(
    `the installation key ${file} is not the key this installation's app configuration was encrypted with: ` +
      'restore the original file from a backup (or set SLIPWAY_SECRET_KEY to the original key)',
  );
}
