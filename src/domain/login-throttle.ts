// Login failure limits that an attacker cannot turn into a lockout of the account's owner.
import type { FailureLimiter, ReservedAttempt } from './rate-limiter.js';

const pairKey = (account: string, address: string): string => `login:${address}|${account}`;
const addressKey = (address: string): string => `ip:${address}`;
const accountKey = (account: string): string => `email:${account}`;

/**
 * Reserves one login attempt for `account` from `address`, before the password is checked.
 * Refused (seconds to wait) when this address has failed too often for this account, or too often
 * overall. Failures against the account from every address are counted too, but they only hold
 * back addresses that have themselves failed for it: while an account is under attack, an address
 * with no failure for it still gets its check (so the owner logging in from elsewhere gets in, and
 * a spread-out attacker gets one guess per address rather than a full allowance).
 */
export function reserveLogin(limiter: FailureLimiter, account: string, address: string): ReservedAttempt | { retryAfterSeconds: number } {
  const pair = pairKey(account, address);
  const underAttack = limiter.retryAfterSeconds(accountKey(account));
  if (underAttack > 0 && limiter.failures(pair) > 0) {
    return { retryAfterSeconds: Math.max(underAttack, limiter.retryAfterSeconds(pair), limiter.retryAfterSeconds(addressKey(address))) };
  }
  return limiter.reserve([pair, addressKey(address)], [accountKey(account)]);
}

/** A login succeeded: this address's failures for the account, and the account's, are forgiven. */
export function loginSucceeded(limiter: FailureLimiter, account: string, address: string): void {
  limiter.reset(pairKey(account, address));
  limiter.reset(accountKey(account));
}
