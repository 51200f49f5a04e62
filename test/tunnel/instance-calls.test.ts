// Signed calls between instances: a call verifies once, on the instance it names, within the window; anything else is refused.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import { describe, test } from 'node:test';
import { ValueCipher } from '../../src/secrets/value-cipher.js';
import { CALL_WINDOW_MS, FORWARD_HEADERS, INSTANCE_CALL_KEY_INFO, InstanceCalls, isInstanceCall, type CallFacts } from '../../src/tunnel/instance-calls.js';

const installationKey = crypto.randomBytes(32);
const key = new ValueCipher(installationKey).deriveKey(INSTANCE_CALL_KEY_INFO);
const facts: CallFacts = { method: 'POST', host: 'demo.apps.test', path: '/upload?x=1', forwardedFor: '203.0.113.7', proto: 'http', target: 'holder' };

/** Raw `[name, value, …]` pairs as Node's IncomingMessage.headers shows them. */
function headersOf(raw: string[]): IncomingHttpHeaders {
  const out: IncomingHttpHeaders = {};
  for (let i = 0; i + 1 < raw.length; i += 2) out[(raw[i] as string).toLowerCase()] = raw[i + 1] as string;
  return out;
}

function clock(start: number): { now: () => number; advance(ms: number): void } {
  let t = start;
  return { now: () => t, advance: (ms) => (t += ms) };
}

describe('inter-instance call signing', () => {
  test('the derived key is stable for one installation key, differs from it and from another purpose', () => {
    const again = new ValueCipher(Buffer.from(installationKey)).deriveKey(INSTANCE_CALL_KEY_INFO);
    assert.deepEqual(again, key);
    assert.equal(key.length, 32);
    assert.notDeepEqual(key, installationKey);
    assert.notDeepEqual(new ValueCipher(installationKey).deriveKey('another purpose'), key);
  });

  test('a signed call verifies once on the instance it names, with the visitor it carries', () => {
    const time = clock(1_800_000_000_000);
    const forwarder = new InstanceCalls(key, 'forwarder', { now: time.now });
    const holder = new InstanceCalls(key, 'holder', { now: time.now });
    const headers = headersOf(forwarder.sign(facts));
    assert.ok(isInstanceCall(headers));
    assert.deepEqual(holder.verify('POST', 'demo.apps.test', '/upload?x=1', headers), { ok: true, forwardedFor: '203.0.113.7', proto: 'http' });
    const replay = holder.verify('POST', 'demo.apps.test', '/upload?x=1', headers);
    assert.equal(replay.ok, false);
    assert.match(replay.ok ? '' : replay.message, /replay/);
  });

  test('host and method compare without case; every other signed part must match exactly', () => {
    const time = clock(1_800_000_000_000);
    const holder = new InstanceCalls(key, 'holder', { now: time.now });
    const signer = new InstanceCalls(key, 'x', { now: time.now });
    assert.equal(holder.verify('post', 'DEMO.apps.test', '/upload?x=1', headersOf(signer.sign(facts))).ok, true);
    const changed: Array<[string, string, string, (h: IncomingHttpHeaders) => void]> = [
      ['PUT', 'demo.apps.test', '/upload?x=1', () => undefined],
      ['POST', 'other.apps.test', '/upload?x=1', () => undefined],
      ['POST', 'demo.apps.test', '/upload?x=2', () => undefined],
      ['POST', 'demo.apps.test', '/upload?x=1', (h) => (h[FORWARD_HEADERS.for] = '198.51.100.1')],
      ['POST', 'demo.apps.test', '/upload?x=1', (h) => (h[FORWARD_HEADERS.proto] = 'https')],
      ['POST', 'demo.apps.test', '/upload?x=1', (h) => (h[FORWARD_HEADERS.timestamp] = String(time.now() + 1))],
      ['POST', 'demo.apps.test', '/upload?x=1', (h) => (h[FORWARD_HEADERS.nonce] = crypto.randomBytes(18).toString('base64url'))],
    ];
    for (const [method, host, path, edit] of changed) {
      const headers = headersOf(signer.sign(facts));
      edit(headers);
      const result = holder.verify(method, host, path, headers);
      assert.equal(result.ok, false, `${method} ${host}${path} ${JSON.stringify(headers)}`);
    }
  });

  test('a call for another instance, with another key, expired, from the future or incomplete is refused', () => {
    const time = clock(1_800_000_000_000);
    const holder = new InstanceCalls(key, 'holder', { now: time.now });
    const verify = (headers: IncomingHttpHeaders): string => {
      const result = holder.verify(facts.method, facts.host, facts.path, headers);
      assert.equal(result.ok, false);
      return result.ok ? '' : result.message;
    };
    const signer = new InstanceCalls(key, 'x', { now: time.now });
    assert.match(verify(headersOf(signer.sign({ ...facts, target: 'someone-else' }))), /another instance/);
    const forged = new InstanceCalls(crypto.randomBytes(32), 'x', { now: time.now });
    assert.match(verify(headersOf(forged.sign(facts))), /not signed/);
    // Not even the installation key itself: only the derived one.
    assert.match(verify(headersOf(new InstanceCalls(installationKey, 'x', { now: time.now }).sign(facts))), /not signed/);
    const old = new InstanceCalls(key, 'x', { now: () => time.now() - CALL_WINDOW_MS - 1 });
    assert.match(verify(headersOf(old.sign(facts))), /older than/);
    const future = new InstanceCalls(key, 'x', { now: () => time.now() + CALL_WINDOW_MS + 1 });
    assert.match(verify(headersOf(future.sign(facts))), /older than/);
    for (const name of Object.values(FORWARD_HEADERS)) {
      const headers = headersOf(signer.sign(facts));
      delete headers[name];
      assert.match(verify(headers), /missing/);
    }
    const malformed = headersOf(signer.sign(facts));
    malformed[FORWARD_HEADERS.signature] = 'not-hex';
    assert.match(verify(malformed), /malformed/);
    const doubled = headersOf(signer.sign(facts));
    doubled[FORWARD_HEADERS.nonce] = ['a'.repeat(20), 'b'.repeat(20)] as unknown as string; // a header sent twice arrives as a list
    assert.match(verify(doubled), /missing/);
  });

  test('a replay after the window is still refused once its nonce has been forgotten', () => {
    const time = clock(1_800_000_000_000);
    const holder = new InstanceCalls(key, 'holder', { now: time.now });
    const headers = headersOf(new InstanceCalls(key, 'x', { now: time.now }).sign(facts));
    assert.equal(holder.verify(facts.method, facts.host, facts.path, headers).ok, true);
    time.advance(CALL_WINDOW_MS + 2000);
    // Another call sweeps the remembered nonces; the old one is refused by its timestamp.
    assert.equal(holder.verify(facts.method, facts.host, facts.path, headersOf(new InstanceCalls(key, 'x', { now: time.now }).sign(facts))).ok, true);
    const replay = holder.verify(facts.method, facts.host, facts.path, headers);
    assert.equal(replay.ok, false);
    assert.match(replay.ok ? '' : replay.message, /older than/);
  });
});
