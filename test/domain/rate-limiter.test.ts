// Unit tests of the failure limiter: per-kind thresholds, the window, and reset.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { FailureLimiter, WorkLimit, WorkLimitFullError } from '../../src/domain/rate-limiter.js';

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

test('reserve counts the attempt up front for every key, and a refund takes it back', () => {
  let now = 1_000_000;
  const limiter = new FailureLimiter({ maxFailures: 2, maxFailuresByKind: { ip: 3 }, windowMs: 60_000, now: () => now });
  const keys = ['email:a@b.c', 'ip:10.0.0.1'];
  const first = limiter.reserve(keys);
  const second = limiter.reserve(keys);
  assert.ok('refund' in first && 'refund' in second, 'two attempts fit the limit of 2');
  // Both are still in flight (nothing recorded after them), yet a third is refused: no race.
  const third = limiter.reserve(keys);
  assert.ok(!('refund' in third));
  assert.equal(third.retryAfterSeconds, 60);
  assert.equal(limiter.retryAfterSeconds('ip:10.0.0.1'), 0, 'a refused attempt counted nothing');
  second.refund();
  second.refund();
  assert.equal(limiter.retryAfterSeconds('email:a@b.c'), 0, 'one refund (idempotent) frees one slot');
  const fourth = limiter.reserve(['email:other@b.c', 'ip:10.0.0.1']);
  assert.ok('refund' in fourth);
  assert.ok('refund' in limiter.reserve(['email:third@b.c', 'ip:10.0.0.1']));
  assert.ok(!('refund' in limiter.reserve(['email:fourth@b.c', 'ip:10.0.0.1'])), 'the address limit (3) holds across e-mails');
  now += 60_001;
  assert.ok('refund' in limiter.reserve(keys), 'the window passed');
});

test('a work limit runs at most its concurrency, queues up to its bound and refuses beyond', async () => {
  const limit = new WorkLimit({ concurrency: 2, maxWaiting: 3 });
  let running = 0;
  let peak = 0;
  const gates: Array<() => void> = [];
  const task = (): Promise<number> =>
    new Promise<number>((resolve) => {
      running++;
      peak = Math.max(peak, running);
      gates.push(() => {
        running--;
        resolve(1);
      });
    });
  const accepted = Array.from({ length: 5 }, () => limit.run(task));
  await assert.rejects(limit.run(task), WorkLimitFullError);
  assert.equal(limit.running, 2);
  assert.equal(limit.waiting, 3);
  let done = 0;
  while (done < 5) {
    await new Promise((resolve) => setImmediate(resolve));
    const gate = gates.shift();
    if (gate === undefined) continue;
    gate();
    done++;
  }
  assert.deepEqual(await Promise.all(accepted), [1, 1, 1, 1, 1]);
  assert.equal(peak, 2);
  assert.equal(limit.running, 0);
  await assert.rejects(
    limit.run(() => Promise.reject(new Error('boom'))),
    /boom/,
  );
  assert.equal(limit.running, 0, 'a failed task frees its slot');
});
