// The account store: the port through which account use-cases read and write users and sessions, and authentication finds credentials.
import type { TeamRole } from '../core/principal.js';
import type { AuditRecord } from './audit.js';

/** A user's record (the deployment-list version is the deployment stores' business). */
export interface UserRow {
  id: string;
  email: string;
  password_hash: string;
  is_admin: number;
  created_at: string;
  updated_at: string;
  /** The TOTP secret (AES-256-GCM ciphertext under the installation key), pending until `totp_enabled`. */
  totp_secret: string | null;
  totp_enabled: number;
  /** The last TOTP time step accepted: a code is usable once. */
  totp_last_step: number | null;
  /** 1 when an administrator disabled the user: logins, sessions and API keys answer 401. */
  disabled: number;
}

/** A login's session: only the token's SHA-256 is kept. */
export interface SessionRow {
  id: string;
  user_id: string;
  token_hash: string;
  created_at: string;
  expires_at: string;
}

/** An API key found by its digest, with its user's admin flag. */
export interface KeyCredential {
  id: string;
  user_id: string;
  key_hash: string;
  key_prefix: string;
  is_admin: number;
  disabled: number;
}

/** A session found by its token's digest, with its user's admin flag. */
export interface SessionCredential {
  id: string;
  user_id: string;
  token_hash: string;
  expires_at: string;
  is_admin: number;
  disabled: number;
}

/**
 * Users and sessions, and the credential reads of every authenticated request; implemented over
 * the database in src/db/account-store.ts. Nothing is cached: a revoked key or ended session
 * fails on the very next request, in every process.
 */
export interface AccountStore {
  /** True once any user exists. */
  hasUsers(): Promise<boolean>;
  /** Records a user; `email_taken` when another user has the e-mail. With `audit`, its entry is appended in the same transaction (as for every write here). */
  createUser(row: UserRow, audit?: AuditRecord): Promise<'created' | 'email_taken'>;
  userById(id: string): Promise<UserRow | undefined>;
  /** The user with this (normalized) e-mail. */
  userByEmail(email: string): Promise<UserRow | undefined>;
  createSession(session: SessionRow, audit?: AuditRecord): Promise<void>;
  endSession(id: string): Promise<void>;
  /**
   * Sets a user's password hash and, in the same transaction, ends the user's sessions except
   * `keepSession` (all of them when undefined); `clearTwoFactor` also turns two-factor login off.
   */
  setPassword(userId: string, passwordHash: string, options: { keepSession: string | undefined; clearTwoFactor?: boolean }, audit?: AuditRecord): Promise<void>;
  /**
   * Changes a user's two-factor state (the secret, whether it is on, the last step used); with
   * `endSessions`, in the same transaction, ends the user's sessions except `keepSession` (all of
   * them when undefined), as setPassword does.
   */
  setTwoFactor(
    userId: string,
    change: Partial<Pick<UserRow, 'totp_secret' | 'totp_enabled' | 'totp_last_step'>>,
    audit?: AuditRecord,
    endSessions?: { keepSession: string | undefined },
  ): Promise<void>;
  /** Records `step` as the user's last TOTP step unless one as late was used already: false then (a code is usable once). */
  takeTotpStep(userId: string, step: number): Promise<boolean>;
  /** Appends an entry that records no change of its own (a refused login). */
  audit(record: AuditRecord): Promise<void>;
  /** The API key with this digest (one indexed read). */
  keyByDigest(digest: string): Promise<KeyCredential | undefined>;
  /** The session with this token digest (one indexed read). */
  sessionByDigest(digest: string): Promise<SessionCredential | undefined>;
  /** Users by e-mail, a page at a time (after the position, `limit` rows). */
  pageUsers(after: readonly [string, string] | undefined, limit: number): Promise<UserRow[]>;
  /**
   * Sets a user's `disabled` flag; disabling ends every session of the user in the same transaction.
   * False when no such user.
   */
  setDisabled(userId: string, disabled: boolean, audit?: AuditRecord): Promise<boolean>;
  /** The user's role in each of their teams. */
  teamRoles(userId: string): Promise<ReadonlyMap<string, TeamRole>>;
}
