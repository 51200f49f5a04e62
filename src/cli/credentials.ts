// Saved login: `<configDir>/config.json` (0600, in a 0700 directory), written atomically.
import { randomBytes } from 'node:crypto';
import { chmod, mkdir, open, readFile, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import type { ClientEnv } from '../config.js';
import { CliError, usageError } from './cli-error.js';

/** What `slipway login` remembers. */
export interface SavedLogin {
  /** Server base URL, e.g. `http://localhost:8080`. */
  url?: string;
  /** Session token from e-mail/password login. */
  token?: string;
  /** API key given to `login --api-key`. */
  api_key?: string;
  /** E-mail of the logged-in user (for display only). */
  email?: string;
  /** When the session token expires (ISO 8601). */
  expires_at?: string;
}

/** The server and bearer credential a command uses, and where they came from. */
export interface ActiveLogin {
  readonly url: string;
  readonly bearer: string | undefined;
  readonly source: 'environment' | 'saved login' | 'none';
}

/** Path of the credentials file. */
export function configPath(configDir: string): string {
  return path.join(configDir, 'config.json');
}

/** Reads the saved login; an absent file is an empty login, an unreadable one an error. */
export async function readSavedLogin(configDir: string): Promise<SavedLogin> {
  let text: string;
  try {
    text = await readFile(configPath(configDir), 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return {};
    throw new CliError(`cannot read ${configPath(configDir)}: ${(err as Error).message}`);
  }
  try {
    const parsed: unknown = JSON.parse(text);
    if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) throw new Error('not an object');
    const out: SavedLogin = {};
    for (const field of ['url', 'token', 'api_key', 'email', 'expires_at'] as const) {
      const value = (parsed as Record<string, unknown>)[field];
      if (typeof value === 'string') out[field] = value;
    }
    return out;
  } catch {
    throw new CliError(`${configPath(configDir)} is not valid JSON: fix or delete it, then run \`slipway login\``);
  }
}

/**
 * Replaces the saved login. The file is written to a temporary name with mode 0600 and renamed
 * over the old one, so a crash never leaves half a file and the secret is never world-readable.
 */
export async function writeSavedLogin(configDir: string, login: SavedLogin): Promise<void> {
  await mkdir(configDir, { recursive: true, mode: 0o700 });
  await chmod(configDir, 0o700);
  const target = configPath(configDir);
  const tmp = `${target}.${randomBytes(6).toString('hex')}.tmp`;
  const handle = await open(tmp, 'wx', 0o600);
  try {
    await handle.writeFile(`${JSON.stringify(login, null, 2)}\n`);
    await handle.sync();
  } finally {
    await handle.close();
  }
  try {
    await rename(tmp, target);
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
}

/** Normalises a server URL given by the user: scheme required, no trailing slash. */
export function normaliseServerUrl(raw: string): string {
  let url: URL;
  try {
    url = new URL(/^[a-z][a-z0-9+.-]*:\/\//i.test(raw) ? raw : `http://${raw}`);
  } catch {
    throw usageError(`not a server URL: "${raw}" (expected e.g. http://localhost:8080)`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw usageError(`the server URL must be http:// or https://, got "${raw}"`);
  }
  return url.href.replace(/\/+$/, '');
}

/**
 * Which server and credential to use: SLIPWAY_URL and SLIPWAY_API_KEY win over the saved login.
 * A saved credential is only sent to the server it was saved for, so pointing SLIPWAY_URL at
 * another server never leaks it.
 */
export function activeLogin(env: ClientEnv, saved: SavedLogin): ActiveLogin | undefined {
  const url = env.url !== undefined ? normaliseServerUrl(env.url) : saved.url;
  if (url === undefined) return undefined;
  if (env.apiKey !== undefined) return { url, bearer: env.apiKey, source: 'environment' };
  const sameServer = saved.url !== undefined && saved.url === url;
  const bearer = sameServer ? (saved.token ?? saved.api_key) : undefined;
  return { url, bearer, source: bearer === undefined ? 'none' : 'saved login' };
}
