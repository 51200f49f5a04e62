// The upload limit's sizes as people read them (issue 33 item 4): MiB, KiB below a MiB, bytes below a KiB.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { formatMiB, uploadTooLargeMessage } from '../../src/core/upload-limit.js';

test('sizes in MiB with one decimal at most, KiB below one MiB, bytes below one KiB (a small Dockerfile is never "0 KiB")', () => {
  assert.equal(formatMiB(536870912), '512 MiB');
  assert.equal(formatMiB(1.5 * 1024 * 1024), '1.5 MiB');
  assert.equal(formatMiB(2_936_012), '2.7 MiB');
  assert.equal(formatMiB(1024), '1 KiB');
  assert.equal(formatMiB(1536), '1.5 KiB');
  assert.equal(formatMiB(56), '56 B');
  assert.equal(formatMiB(0), '0 B');
});

test("the server's refusal names the limit in MiB and what to do", () => {
  assert.equal(
    uploadTooLargeMessage(536870912),
    "the archive is larger than this server's upload limit of 512 MiB: leave files out with .dockerignore (dependencies, build output, data), or ask the operator to raise SLIPWAY_MAX_UPLOAD_BYTES",
  );
});
