// Two-factor login (decisions §18): TOTP setup, confirmation, turning it off, and the check a login makes.
import type { AccountStore } from './account-store.js';
import { DomainError } from '../core/errors.js';
import type { Principal } from '../core/principal.js';
import type { FailureLimiter } from './rate-limiter.js';
import { actorOf, type AuditEvent } from './audit.js';
import { base32Decode, base32Encode, newTotpSecret, otpauthUrl, verifyTotp } from './totp.js';

/** Seals the TOTP secret at rest (the installation key's AES-256-GCM cipher, src/secrets). */
export interface SecretSeal {
  encrypt(plaintext: string, context: string): string;
  decrypt(value: string, context: string): string;
}

export interface TwoFactorDeps {
  readonly accounts: AccountStore;
  readonly seal: SecretSeal;
  /** Wrong codes are limited like wrong passwords (the login limiter). */
  readonly limiter: FailureLimiter;
  /** The issuer shown in authenticator apps (the server's domain). */
  readonly issuer: string;
  /** The clock (tests fix it). */
  readonly now?: () => number;
}

const context = (userId: string): string => `totp:${userId}`;
const event = (action: string, userId: string): AuditEvent => ({ action, targetType: 'user', targetId: userId, teamId: null });

async function userRow(accounts: AccountStore, userId: string): Promise<{ id: string; email: string; totp_secret: string | null; totp_enabled: number; totp_last_step: number | null }> {
  const user = await accounts.userById(userId);
  if (user === undefined) throw new DomainError('unauthorized', 'missing or invalid credentials');
  return user;
}

/** Starts (or restarts) setup: a new secret, pending until a code from it is confirmed. */
export async function beginTwoFactor(deps: TwoFactorDeps, principal: Principal): Promise<{ secret: string; otpauth_url: string }> {
  const user = await userRow(deps.accounts, principal.userId);
  if (user.totp_enabled === 1) throw new DomainError('invalid_state', 'two-factor login is already on; turn it off first (DELETE /api/v1/users/me/2fa with a code)');
  const secret = newTotpSecret();
  const sealed = deps.seal.encrypt(base32Encode(secret), context(user.id));
  await deps.accounts.setTwoFactor(user.id, { totp_secret: sealed, totp_enabled: 0, totp_last_step: null }, { actor: actorOf(principal), event: event('user.2fa.setup', user.id) });
  return { secret: base32Encode(secret), otpauth_url: otpauthUrl(deps.issuer, user.email, secret) };
}

/**
 * Checks a code of the principal's secret under the limiter (a wrong one counts like a wrong
 * password): the step it matched, or 400 validation_error. The step is recorded by the caller; a
 * refused code (wrong, or refused by the limiter) is an audit entry of `action` with outcome failure.
 */
async function checkCode(
  deps: TwoFactorDeps,
  principal: Principal,
  action: string,
  user: { id: string; totp_secret: string | null; totp_last_step: number | null },
  code: string,
): Promise<number> {
  const refused = (): Promise<void> => deps.accounts.audit({ actor: actorOf(principal), event: { ...event(action, user.id), outcome: 'failure' } });
  const attempt = deps.limiter.reserve([`otp:${user.id}`]);
  if (!('refund' in attempt)) {
    await refused();
    throw new DomainError('rate_limited', `too many wrong codes; try again in ${attempt.retryAfterSeconds} s`, { retryAfterSeconds: attempt.retryAfterSeconds });
  }
  const step = user.totp_secret === null ? null : codeStep(deps, user.id, user.totp_secret, code, user.totp_last_step);
  if (step === null) {
    await refused();
    throw new DomainError('validation_error', 'code is wrong, expired or already used: enter the current 6-digit code from your authenticator app');
  }
  attempt.refund();
  deps.limiter.reset(`otp:${user.id}`);
  return step;
}

function codeStep(deps: TwoFactorDeps, userId: string, sealed: string, code: string, lastStep: number | null): number | null {
  const key = base32Decode(deps.seal.decrypt(sealed, context(userId)));
  return verifyTotp(key, code.trim(), (deps.now ?? Date.now)(), lastStep);
}

/**
 * Confirms setup with a code of the new secret: from now on, logging in needs a code too. The
 * user's other sessions end (the one that turned it on stays), as a password change does: a
 * session opened with the password alone must not outlive the second factor.
 */
export async function confirmTwoFactor(deps: TwoFactorDeps, principal: Principal, input: { code: string }): Promise<{ enabled: true }> {
  const user = await userRow(deps.accounts, principal.userId);
  if (user.totp_enabled === 1) throw new DomainError('invalid_state', 'two-factor login is already on');
  if (user.totp_secret === null) throw new DomainError('invalid_state', 'start two-factor setup first (POST /api/v1/users/me/2fa)');
  const step = await checkCode(deps, principal, 'user.2fa.enable', user, input.code);
  await deps.accounts.setTwoFactor(user.id, { totp_enabled: 1, totp_last_step: step }, { actor: actorOf(principal), event: event('user.2fa.enable', user.id) }, { keepSession: principal.sessionId });
  return { enabled: true };
}

/** Turns two-factor login off, with a current code. */
export async function disableTwoFactor(deps: TwoFactorDeps, principal: Principal, input: { code: string }): Promise<void> {
  const user = await userRow(deps.accounts, principal.userId);
  if (user.totp_enabled !== 1) throw new DomainError('invalid_state', 'two-factor login is not on');
  const step = await checkCode(deps, principal, 'user.2fa.disable', user, input.code);
  await deps.accounts.setTwoFactor(user.id, { totp_secret: null, totp_enabled: 0, totp_last_step: step }, { actor: actorOf(principal), event: event('user.2fa.disable', user.id) });
}

/** Whether the user has two-factor login on. */
export async function twoFactorEnabled(accounts: AccountStore, userId: string): Promise<boolean> {
  return (await userRow(accounts, userId)).totp_enabled === 1;
}

/**
 * The second factor of a login whose password was right: true when the user has none, or `otp` is
 * a current code not used before (its step is recorded, conditionally, so two logins racing with
 * one code cannot both pass); otherwise why not, for the server alone: the login answers the one
 * 401 of every refused login (accounts.ts, LOGIN_REFUSED), so a missing code tells nobody that the
 * password was right.
 */
export async function checkLoginOtp(deps: TwoFactorDeps, user: { id: string; totp_secret: string | null; totp_enabled: number; totp_last_step: number | null }, otp: string | undefined): Promise<true | string> {
  if (user.totp_enabled !== 1 || user.totp_secret === null) return true;
  if (otp === undefined || otp.trim() === '') return 'no two-factor code';
  const step = codeStep(deps, user.id, user.totp_secret, otp, user.totp_last_step);
  if (step === null) return 'wrong two-factor code';
  return (await deps.accounts.takeTotpStep(user.id, step)) ? true : 'two-factor code used before';
}
