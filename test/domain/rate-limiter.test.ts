// Unit tests of the failure limiter: per-kind thresholds, the window, and reset.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { FailureLimiter } from '../../src/domain/rate-limiter.js';

test('keys block after their kind’s number of failures, until the window passes', () => {
  let now = 1_000_000;
  const limiter = new FailureLimiter({ maxFailures: 3, maxFailuresByKind: { ip: 5 }, windowMs: 60_000, now: () => now });
  for (let i = 0; i < 3; i += 1) {
    assert.equal(limiter.retryAfterSeconds('email:a@b.c'), 0);
    limiter.recordFailure('email:a@b.c');
    limiter.recordFailure('ip:127.0.0.1');
  }
  assert.equal(limiter.retryAfterSeconds('email:a@b.c'), 60);
  assert.equal(limiter.retryAfterSeconds('ip:127.0.0.1'), 0, 'addresses get more room');
  limiter.recordFailure('ip:127.0.0.1');
  limiter.recordFailure('ip:127.0.0.1');
  assert.ok(limiter.retryAfterSeconds('ip:127.0.0.1') > 0);
  assert.equal(limiter.retryAfterSeconds('email:other@b.c'), 0, 'other keys are unaffected');
  now += 30_000;
  assert.equal(limiter.retryAfterSeconds('email:a@b.c'), 30);
  now += 30_001;
  assert.equal(limiter.retryAfterSeconds('email:a@b.c'), 0);
  limiter.recordFailure('email:x@y.z');
  limiter.reset('email:x@y.z');
  assert.equal(limiter.retryAfterSeconds('email:x@y.z'), 0);
});
