// A failed build's `error`: an engine call that outlasted its own limit is named as such, not reported as the build's time limit; a cancel says its reason.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { BuildTimeLimit, describeFailure } from '../../src/deploy/failures.js';
import { timeoutError } from '../../src/runtime/docker/engine-calls.js';

const BUILD_LIMIT_MS = 900_000;

test('an engine call past its own 30 s limit is named; the build time limit only for the build deadline', () => {
  const live = new AbortController().signal;
  assert.equal(describeFailure(timeoutError('start container abc', 30_000), live), 'Docker engine: start container abc did not finish within 30s');
  assert.equal(describeFailure(new BuildTimeLimit(BUILD_LIMIT_MS), live), 'the build exceeded its time limit of 900 s');
  // A shorter limit of some other step is not the build's: it says what it is.
  const other = new DOMException('The operation was aborted due to timeout', 'TimeoutError');
  assert.equal(describeFailure(other, live), 'The operation was aborted due to timeout');
});

test('a cancelled build says why it was cancelled', () => {
  const cancel = new AbortController();
  cancel.abort(new Error('superseded by a newer deploy'));
  assert.equal(describeFailure(timeoutError('build image', 30_000), cancel.signal), 'superseded by a newer deploy');
});
