// Unit tests of secret redaction: every encoded form, and a secret split across stream chunks.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { REDACTED, SecretRedactor, redactedStream, redactorFor } from '../../src/secrets/redact.js';

const secret = 'hunter2 pass/word&more+';

test('the value, its base64 (standard, URL-safe, padded or not, at any alignment) and URL-encoded forms are redacted', () => {
  const r = new SecretRedactor([secret]);
  const b64 = Buffer.from(secret).toString('base64');
  const samples = [
    secret,
    b64,
    b64.replace(/=+$/, ''),
    b64.replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, ''),
    encodeURIComponent(secret),
    encodeURIComponent(secret).replace(/%[0-9A-F]{2}/g, (m) => m.toLowerCase()),
    encodeURIComponent(secret).replace(/%20/g, '+'),
  ];
  for (const sample of samples) assert.equal(r.redact(`before ${sample} after`), `before ${REDACTED} after`, sample);
  // Inside a longer encoded text (a Basic credential), at each of the three alignments.
  for (const prefix of ['u:', 'us:', 'use:']) {
    const encoded = Buffer.from(`${prefix}${secret}`).toString('base64');
    assert.ok(r.redact(encoded).includes(REDACTED), `${prefix}: ${r.redact(encoded)}`);
  }
});

test('only secret variables are redacted, and values too short to mean anything are left', () => {
  const r = redactorFor([
    { value: 'plain-value', secret: false },
    { value: 'secret-value', secret: true },
    { value: 'ab', secret: true },
  ]);
  assert.equal(r.redact('plain-value secret-value ab'), `plain-value ${REDACTED} ab`);
  assert.ok(redactorFor([]).empty);
});

test('a secret split across chunks of a stream is still redacted; other text passes at once', async () => {
  const r = new SecretRedactor([secret]);
  const stream = r.stream();
  assert.equal(stream.push('line one\n'), 'line one\n', 'text that cannot start a secret is not held');
  let out = stream.push(`x ${secret.slice(0, 5)}`);
  out += stream.push(secret.slice(5, 12));
  out += stream.push(`${secret.slice(12)} y\n`);
  out += stream.flush();
  assert.equal(out, `x ${REDACTED} y\n`);
  async function* chunks(): AsyncGenerator<string> {
    for (const c of secret) yield c;
    yield '\n';
  }
  let all = '';
  for await (const chunk of redactedStream(r, chunks())) all += chunk;
  assert.equal(all, `${REDACTED}\n`);
});
