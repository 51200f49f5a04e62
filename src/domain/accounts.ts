// Account use-cases: admin bootstrap, login/logout, bearer authentication, users and passwords.
import crypto from 'node:crypto';
import { nowIso } from '../core/now.js';
import { DomainError } from '../core/errors.js';
import type { Principal } from '../core/principal.js';
import type { AccountStore, UserRow } from './account-store.js';
import { authorizeAdmin } from './policy.js';
import { actorOf, type AuditActor, type AuditEvent } from './audit.js';
import type { KeyUsage } from './key-usage.js';
import { loginSucceeded, reserveLogin } from './login-throttle.js';
import { WorkLimit, WorkLimitFullError, type FailureLimiter } from './rate-limiter.js';
import { API_KEY_PATTERN, SESSION_TOKEN_PATTERN, digestsEqual, newSessionToken, randomBase62, sha256Hex } from '../core/credentials.js';
import { dummyPasswordHash, hashPassword, verifyPassword } from './password-hashing.js';
import { assertUuid } from './deployments.js';
import { pageFromRows, type Page, type PageRequest } from '../core/page.js';

export const MIN_PASSWORD_LENGTH = 8;
const MAX_PASSWORD_LENGTH = 1024;

export interface UserView {
  id: string;
  email: string;
  created_at: string;
}

export const presentUser = (row: Pick<UserRow, 'id' | 'email' | 'created_at'>): UserView => ({
  id: row.id,
  email: row.email,
  created_at: row.created_at,
});

const normalizeEmail = (email: string): string => email.trim().toLowerCase();

function checkNewPassword(password: string): void {
  if (password.length < MIN_PASSWORD_LENGTH) {
    throw new DomainError('validation_error', `password must be at least ${MIN_PASSWORD_LENGTH} characters`);
  }
  if (password.length > MAX_PASSWORD_LENGTH) {
    throw new DomainError('validation_error', `password must be at most ${MAX_PASSWORD_LENGTH} characters`);
  }
}

async function insertUser(accounts: AccountStore, email: string, password: string, isAdmin: boolean, actor?: AuditActor): Promise<UserRow> {
  const normalized = normalizeEmail(email);
  if (!/^[^\s@]+@[^\s@]+$/.test(normalized) || normalized.length > 254) {
    throw new DomainError('validation_error', 'email must be an e-mail address');
  }
  checkNewPassword(password);
  const now = nowIso();
  const row: UserRow = {
    id: crypto.randomUUID(),
    email: normalized,
    password_hash: await hashPassword(password),
    is_admin: isAdmin ? 1 : 0,
    created_at: now,
    updated_at: now,
    totp_secret: null,
    totp_enabled: 0,
    totp_last_step: null,
    disabled: 0,
  };
  const audit = actor === undefined ? undefined : { actor, event: { action: 'user.create', targetType: 'user', targetId: row.id, teamId: null } };
  if ((await accounts.createUser(row, audit)) === 'email_taken') throw new DomainError('email_taken', 'a user with this email already exists');
  return row;
}

/**
 * On a database with no users, creates the admin: from the given credentials, or
 * `admin@localhost` with a random password, which is returned so the caller can print it once.
 */
export async function bootstrapAdmin(
  accounts: AccountStore,
  credentials: { email: string; password: string } | undefined,
): Promise<{ email: string; generatedPassword: string | undefined } | undefined> {
  if (await accounts.hasUsers()) return undefined;
  const generatedPassword = credentials === undefined ? randomBase62(20) : undefined;
  const email = credentials?.email ?? 'admin@localhost';
  await insertUser(accounts, email, credentials?.password ?? (generatedPassword as string), true);
  return { email: normalizeEmail(email), generatedPassword };
}

/**
 * Password checks that run at once, and that may wait for a turn. A check is scrypt with 32 MiB
 * for about 0.1–0.5 s on libuv's pool (4 threads, shared with file and DNS work): two at a time
 * leave the pool's other threads to the rest of the server and cap their memory at 64 MiB, however
 * many accounts a flood of logins names. Beyond the queue a login is answered 429 at once.
 */
const passwordChecks = new WorkLimit({ concurrency: 2, maxWaiting: 32 });

/** Checks a password within {@link passwordChecks}; a full queue is `rate_limited` (retry in 1 s). */
const checkPassword = (password: string, stored: string): Promise<boolean> => withPasswordSlot(() => verifyPassword(password, stored));

/** Runs scrypt work within {@link passwordChecks}; a full queue is `rate_limited` (retry in 1 s). */
async function withPasswordSlot<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await passwordChecks.run(work);
  } catch (err) {
    if (err instanceof WorkLimitFullError) {
      throw new DomainError('rate_limited', 'too many password checks in progress; try again in 1 s', { retryAfterSeconds: 1 });
    }
    throw err;
  }
}

/** Password checks running or waiting now (for tests and metrics). */
export const passwordCheckLoad = (): { running: number; waiting: number } => ({
  running: passwordChecks.running,
  waiting: passwordChecks.waiting,
});

export interface AccountDeps {
  readonly accounts: AccountStore;
  readonly sessionTtlMs: number;
  readonly loginLimiter: FailureLimiter;
  /** The second factor of a login whose password was right (src/domain/two-factor.ts): true, or why not. */
  readonly secondFactor?: (user: UserRow, otp: string | undefined) => Promise<true | string>;
}

/**
 * The one message of every refused login: a wrong e-mail, a wrong password, a disabled account, a
 * missing or wrong two-factor code. The answer never says which (no oracle for a stolen password
 * without its second factor, nor for which accounts exist or have two-factor login on).
 */
export const LOGIN_REFUSED = 'wrong email, password or two-factor code';

/** Logs in with e-mail and password (and `otp` when the account has two-factor login); one answer for every failure. */
export async function loginUser(
  deps: AccountDeps,
  input: { email: string; password: string; clientIp: string; otp?: string | undefined },
): Promise<{ token: string; expires_at: string; user: UserView }> {
  const email = normalizeEmail(input.email);
  // The attempt counts as a failure BEFORE the password is checked, for the e-mail and the address
  // alike, so parallel attempts cannot all pass the check; a success (or no check at all) refunds it.
  const attempt = reserveLogin(deps.loginLimiter, email, input.clientIp);
  if (!('refund' in attempt)) {
    const wait = attempt.retryAfterSeconds;
    throw new DomainError('rate_limited', `too many failed logins; try again in ${wait} s`, { retryAfterSeconds: wait });
  }
  let user: UserRow | undefined;
  let ok: boolean;
  try {
    user = await deps.accounts.userByEmail(email);
    ok = await checkPassword(input.password, user?.password_hash ?? (await dummyPasswordHash()));
  } catch (err) {
    attempt.refund();
    throw err;
  }
  // A disabled user's right password is answered like a wrong one (no oracle for which accounts exist or are disabled).
  if (user === undefined || !ok || user.disabled === 1) throw new DomainError('invalid_credentials', LOGIN_REFUSED);
  // Beside the password, the second factor: a missing or wrong code fails the login exactly like a wrong password.
  const second = deps.secondFactor === undefined ? true : await deps.secondFactor(user, input.otp);
  if (second !== true) throw new DomainError('invalid_credentials', LOGIN_REFUSED);
  attempt.refund();
  loginSucceeded(deps.loginLimiter, email, input.clientIp);
  const token = newSessionToken();
  const now = Date.now();
  const expiresAt = new Date(now + deps.sessionTtlMs).toISOString();
  const session = { id: crypto.randomUUID(), user_id: user.id, token_hash: sha256Hex(token), created_at: new Date(now).toISOString(), expires_at: expiresAt };
  const actor = { userId: user.id, email: user.email, via: 'session', ip: input.clientIp };
  await deps.accounts.createSession(session, { actor, event: loginEvent(user.id, 'success') });
  return { token, expires_at: expiresAt, user: presentUser(user) };
}

const loginEvent = (userId: string | null, outcome: 'success' | 'failure'): AuditEvent => ({ action: 'auth.login', targetType: 'user', targetId: userId, teamId: null, outcome });

/**
 * Records a refused login (wrong e-mail, password or code, or refused by the login limiter): the account it
 * named, if any, sees it in its audit log. The e-mail is kept only when it looks like one.
 */
export async function recordFailedLogin(accounts: AccountStore, input: { email: string; clientIp: string }): Promise<void> {
  const email = normalizeEmail(input.email);
  const plausible = /^[^\s@]+@[^\s@]+$/.test(email) && email.length <= 254;
  const user = plausible ? await accounts.userByEmail(email) : undefined;
  const actor = { userId: user?.id ?? null, email: plausible ? email : null, via: 'session', ip: input.clientIp };
  await accounts.audit({ actor, event: loginEvent(user?.id ?? null, 'failure') });
}

/** Ends the session the principal authenticated with (API keys have no session to end). */
export async function logoutUser(accounts: AccountStore, principal: Principal): Promise<void> {
  if (principal.sessionId !== undefined) await accounts.endSession(principal.sessionId);
}

const unauthorized = (): DomainError => new DomainError('unauthorized', 'missing or invalid credentials');

/**
 * Resolves a bearer value (session token or API key) to a principal. Every kind of bad
 * credential gives the same `unauthorized` error. Using an API key records its use (`last_used_at`).
 */
export async function authenticateBearer(accounts: AccountStore, keyUsage: KeyUsage, token: string | undefined): Promise<Principal> {
  if (token === undefined) throw unauthorized();
  const digest = sha256Hex(token);
  if (API_KEY_PATTERN.test(token)) {
    const key = await accounts.keyByDigest(digest);
    if (key === undefined || !digestsEqual(key.key_hash, digest) || key.disabled === 1) throw unauthorized();
    keyUsage.record(key.id);
    const teams = await accounts.teamRoles(key.user_id);
    return { userId: key.user_id, isAdmin: key.is_admin === 1, via: 'api_key', sessionId: undefined, apiKeyId: key.id, keyPrefix: key.key_prefix, teams };
  }
  if (SESSION_TOKEN_PATTERN.test(token)) {
    const session = await accounts.sessionByDigest(digest);
    if (session === undefined || !digestsEqual(session.token_hash, digest) || session.disabled === 1) throw unauthorized();
    if (Date.parse(session.expires_at) <= Date.now()) {
      await accounts.endSession(session.id);
      throw unauthorized();
    }
    const teams = await accounts.teamRoles(session.user_id);
    return { userId: session.user_id, isAdmin: session.is_admin === 1, via: 'session', sessionId: session.id, apiKeyId: undefined, teams };
  }
  throw unauthorized();
}

/** Creates a user (administrators only). */
export async function createUser(accounts: AccountStore, principal: Principal, input: { email: string; password: string }): Promise<UserView> {
  authorizeAdmin(principal);
  return presentUser(await insertUser(accounts, input.email, input.password, false, actorOf(principal)));
}

export async function getCurrentUser(accounts: AccountStore, principal: Principal): Promise<UserView> {
  const user = await accounts.userById(principal.userId);
  if (user === undefined) throw unauthorized();
  return presentUser(user);
}

/**
 * Changes the caller's password. The specification's rules, in order: a wrong current password is
 * `invalid_password`; a short or unchanged new one is `validation_error`. Other sessions are revoked.
 * Repeated wrong current passwords are `rate_limited` (when a limiter is given).
 */
export async function changePassword(
  accounts: AccountStore,
  principal: Principal,
  input: { current_password: string; new_password: string },
  limiter?: FailureLimiter,
): Promise<void> {
  // A stolen session or key must not become an oracle for guessing the password: wrong guesses are limited like logins.
  // Reserved before the check (like logins), so parallel guesses count too; refunded on success.
  // A refused check (wrong current password, or refused by the limiter) is an audit entry, as a refused login is.
  const refused = (): Promise<void> =>
    accounts.audit({ actor: actorOf(principal), event: { action: 'user.password', targetType: 'user', targetId: principal.userId, teamId: null, outcome: 'failure' } });
  const attempt = limiter?.reserve([`password:${principal.userId}`]);
  if (attempt !== undefined && !('refund' in attempt)) {
    const wait = attempt.retryAfterSeconds;
    await refused();
    throw new DomainError('rate_limited', `too many wrong current passwords; try again in ${wait} s`, { retryAfterSeconds: wait });
  }
  let user: UserRow | undefined;
  let ok: boolean;
  try {
    user = await accounts.userById(principal.userId);
    ok = user !== undefined && (await checkPassword(input.current_password, user.password_hash));
  } catch (err) {
    attempt?.refund();
    throw err;
  }
  if (user === undefined) {
    attempt?.refund();
    throw unauthorized();
  }
  if (!ok) {
    await refused();
    throw new DomainError('invalid_password', 'current password is incorrect');
  }
  attempt?.refund();
  limiter?.reset(`password:${principal.userId}`);
  checkNewPassword(input.new_password);
  if (input.new_password === input.current_password) {
    throw new DomainError('validation_error', 'new password must differ from the current password');
  }
  // A caller who knows the password could otherwise make the server hash without limit.
  const hash = await withPasswordSlot(() => hashPassword(input.new_password));
  const audit = { actor: actorOf(principal), event: { action: 'user.password', targetType: 'user', targetId: user.id, teamId: null } };
  await accounts.setPassword(user.id, hash, { keepSession: principal.sessionId }, audit);
}

/**
 * Sets a user's password from the server host (`slipway server reset-password`): no current
 * password is asked; every session of the user is revoked (API keys keep working).
 * Unknown e-mail is `not_found`; a short password is `validation_error`.
 */
export async function resetPassword(accounts: AccountStore, email: string, password: string): Promise<UserView> {
  checkNewPassword(password);
  const user = await accounts.userByEmail(normalizeEmail(email));
  if (user === undefined) throw new DomainError('not_found', `no user has the e-mail ${normalizeEmail(email)}`);
  const hash = await hashPassword(password);
  // Recovery on the server host: two-factor login is turned off too (the user sets it up again).
  const audit = { actor: { userId: null, email: null, via: 'server', ip: null }, event: { action: 'user.password.reset', targetType: 'user', targetId: user.id, teamId: null } };
  await accounts.setPassword(user.id, hash, { keepSession: undefined, clearTwoFactor: true }, audit);
  return presentUser(user);
}

/** A user as an administrator's list shows it. */
export interface AdminUserView extends UserView {
  is_admin: boolean;
  disabled: boolean;
  two_factor: boolean;
}

const presentAdminUser = (row: UserRow): AdminUserView => ({
  ...presentUser(row),
  is_admin: row.is_admin === 1,
  disabled: row.disabled === 1,
  two_factor: row.totp_enabled === 1,
});

/** Every user, by e-mail, a page at a time (administrators only). */
export async function listUsers(accounts: AccountStore, principal: Principal, page: PageRequest<readonly [string, string]>): Promise<Page<AdminUserView, readonly [string, string]>> {
  authorizeAdmin(principal);
  const rows = await accounts.pageUsers(page.after, page.limit + 1);
  const found = pageFromRows(rows, page.limit, (row) => [row.email, row.id] as const);
  return { items: found.items.map(presentAdminUser), next: found.next };
}

/**
 * An administrator changes a user (administrators only): a new password (every session of the
 * user ends; their API keys and tunnels keep working), and/or disables or enables them. Disabling
 * ends their sessions, makes their logins and API keys answer 401 and closes their open tunnels
 * (`onDisabled`, after the flag is stored; also when it already was); an administrator cannot
 * disable themselves.
 */
export async function updateUser(
  accounts: AccountStore,
  principal: Principal,
  id: string,
  input: { password?: string | undefined; disabled?: boolean | undefined },
  onDisabled: (userId: string) => void,
): Promise<AdminUserView> {
  authorizeAdmin(principal);
  assertUuid(id, 'user');
  if (input.password === undefined && input.disabled === undefined) throw new DomainError('validation_error', 'give password and/or disabled');
  if (input.password !== undefined) checkNewPassword(input.password);
  if (input.disabled === true && id === principal.userId) throw new DomainError('validation_error', 'an administrator cannot disable themselves');
  const user = await accounts.userById(id);
  if (user === undefined) throw new DomainError('not_found', 'user not found');
  const actor = actorOf(principal);
  if (input.password !== undefined) {
    const hash = await withPasswordSlot(() => hashPassword(input.password as string));
    const audit = { actor, event: { action: 'user.password.reset', targetType: 'user', targetId: id, teamId: null } };
    await accounts.setPassword(id, hash, { keepSession: undefined }, audit);
  }
  if (input.disabled !== undefined && (input.disabled ? 1 : 0) !== user.disabled) {
    const audit = { actor, event: { action: input.disabled ? 'user.disable' : 'user.enable', targetType: 'user', targetId: id, teamId: null } };
    if (!(await accounts.setDisabled(id, input.disabled, audit))) throw new DomainError('not_found', 'user not found');
  }
  // Again when already disabled: a tunnel whose connect raced the first disabling is closed too.
  if (input.disabled === true) onDisabled(id);
  return presentAdminUser((await accounts.userById(id)) ?? user);
}
