// Unit tests of the login throttle: an attacker's failures never lock the owner out from elsewhere.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { loginSucceeded, reserveLogin } from '../../src/domain/login-throttle.js';
import { FailureLimiter } from '../../src/domain/rate-limiter.js';

const limiter = (now: () => number): FailureLimiter =>
  new FailureLimiter({ maxFailures: 10, maxFailuresByKind: { ip: 100 }, windowMs: 15 * 60_000, now });
const allowed = (r: ReturnType<typeof reserveLogin>): boolean => 'refund' in r;

test('the attack: 10+ failures from one address limit that address, not the owner at another', () => {
  const l = limiter(() => 1_000_000);
  for (let i = 0; i < 10; i += 1) assert.ok(allowed(reserveLogin(l, 'owner@x.y', '203.0.113.9')), `attempt ${i}`);
  for (let i = 0; i < 5; i += 1) assert.ok(!allowed(reserveLogin(l, 'owner@x.y', '203.0.113.9')), 'the attacker is limited');
  const owner = reserveLogin(l, 'owner@x.y', '198.51.100.1');
  assert.ok('refund' in owner, 'the owner at a clean address gets a check');
  owner.refund();
  loginSucceeded(l, 'owner@x.y', '198.51.100.1');
  assert.ok(!allowed(reserveLogin(l, 'owner@x.y', '203.0.113.9')), 'the attacker is still limited after the owner logged in');
});

test('a spread-out attacker gets one guess per address while the account is under attack', () => {
  const l = limiter(() => 1_000_000);
  for (let i = 0; i < 10; i += 1) assert.ok(allowed(reserveLogin(l, 'a@x.y', `10.0.0.${i}`)));
  // The account has seen 10 failures: addresses that failed for it are held back, fresh ones get one check.
  assert.ok(!allowed(reserveLogin(l, 'a@x.y', '10.0.0.1')));
  assert.ok(allowed(reserveLogin(l, 'a@x.y', '10.0.0.50')));
  assert.ok(!allowed(reserveLogin(l, 'a@x.y', '10.0.0.50')), 'a second guess from the same address waits');
  // Other accounts are unaffected from the same addresses.
  assert.ok(allowed(reserveLogin(l, 'b@x.y', '10.0.0.1')));
});

test('the per-address limit holds across accounts', () => {
  const l = limiter(() => 1_000_000);
  for (let i = 0; i < 100; i += 1) assert.ok(allowed(reserveLogin(l, `u${i}@x.y`, '192.0.2.7')), `account ${i}`);
  const refused = reserveLogin(l, 'fresh@x.y', '192.0.2.7');
  assert.ok(!('refund' in refused) && refused.retryAfterSeconds > 0);
});

test('the limits end with the window', () => {
  let now = 1_000_000;
  const l = limiter(() => now);
  for (let i = 0; i < 10; i += 1) reserveLogin(l, 'w@x.y', '192.0.2.8');
  const refused = reserveLogin(l, 'w@x.y', '192.0.2.8');
  assert.ok(!('refund' in refused) && refused.retryAfterSeconds === 900);
  now += 15 * 60_000 + 1;
  assert.ok(allowed(reserveLogin(l, 'w@x.y', '192.0.2.8')));
});
