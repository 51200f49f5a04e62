// Unit tests: TOTP (RFC 6238's test vectors, a fixed clock), ±1 step of skew, each code usable once, base32 and otpauth URLs.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { base32Decode, base32Encode, hotp, otpauthUrl, stepAt, verifyTotp } from '../../src/domain/totp.js';

const SHA1_KEY = Buffer.from('12345678901234567890');
const SHA256_KEY = Buffer.from('12345678901234567890123456789012');
const SHA512_KEY = Buffer.from('1234567890123456789012345678901234567890123456789012345678901234');

// RFC 6238 appendix B: (time in seconds, SHA-1, SHA-256, SHA-512), 8 digits, 30 s steps.
const VECTORS: Array<[number, string, string, string]> = [
  [59, '94287082', '46119246', '90693936'],
  [1111111109, '07081804', '68084774', '25091201'],
  [1111111111, '14050471', '67062674', '99943326'],
  [1234567890, '89005924', '91819424', '93441116'],
  [2000000000, '69279037', '90698825', '38618901'],
  [20000000000, '65353130', '77737706', '47863826'],
];

test('RFC 6238 test vectors (SHA-1, SHA-256, SHA-512)', () => {
  for (const [seconds, sha1, sha256, sha512] of VECTORS) {
    const step = stepAt(seconds * 1000);
    assert.equal(hotp(SHA1_KEY, step, 8, 'sha1'), sha1, `SHA-1 at ${seconds}`);
    assert.equal(hotp(SHA256_KEY, step, 8, 'sha256'), sha256, `SHA-256 at ${seconds}`);
    assert.equal(hotp(SHA512_KEY, step, 8, 'sha512'), sha512, `SHA-512 at ${seconds}`);
  }
});

test('a code is accepted one step either side of the fixed clock, not two', () => {
  const now = 1111111111 * 1000;
  const code = (seconds: number): string => hotp(SHA1_KEY, stepAt(seconds * 1000));
  assert.equal(code(1111111111), '050471', 'the 6-digit code is the end of the 8-digit one');
  assert.equal(verifyTotp(SHA1_KEY, code(1111111111), now, null), stepAt(now));
  assert.equal(verifyTotp(SHA1_KEY, code(1111111111 - 30), now, null), stepAt(now) - 1);
  assert.equal(verifyTotp(SHA1_KEY, code(1111111111 + 30), now, null), stepAt(now) + 1);
  assert.equal(verifyTotp(SHA1_KEY, code(1111111111 - 60), now, null), null);
  assert.equal(verifyTotp(SHA1_KEY, code(1111111111 + 60), now, null), null);
  for (const bad of ['', '12345', '1234567', 'abcdef', ' 050471x']) assert.equal(verifyTotp(SHA1_KEY, bad, now, null), null, bad);
});

test('each code is usable once: a step at or before the last accepted one never passes again', () => {
  const now = 2000000000 * 1000;
  const current = hotp(SHA1_KEY, stepAt(now));
  const step = verifyTotp(SHA1_KEY, current, now, null);
  assert.equal(step, stepAt(now));
  assert.equal(verifyTotp(SHA1_KEY, current, now, step), null, 'the same code again');
  assert.equal(verifyTotp(SHA1_KEY, hotp(SHA1_KEY, stepAt(now) - 1), now, step), null, 'an older code');
  assert.equal(verifyTotp(SHA1_KEY, hotp(SHA1_KEY, stepAt(now) + 1), now, step), stepAt(now) + 1, 'the next one');
});

test('base32 round-trips (RFC 4648 vectors) and the otpauth URL carries what apps read', () => {
  const vectors: Array<[string, string]> = [['', ''], ['f', 'MY'], ['fo', 'MZXQ'], ['foo', 'MZXW6'], ['foob', 'MZXW6YQ'], ['fooba', 'MZXW6YTB'], ['foobar', 'MZXW6YTBOI']];
  for (const [plain, encoded] of vectors) {
    assert.equal(base32Encode(Buffer.from(plain)), encoded);
    assert.equal(base32Decode(encoded).toString(), plain);
    assert.equal(base32Decode(`${encoded.toLowerCase()}====`).toString(), plain);
  }
  assert.throws(() => base32Decode('MZ1'));
  const url = new URL(otpauthUrl('Slipway (apps.example.com)', 'ann@example.com', SHA1_KEY));
  assert.equal(url.protocol, 'otpauth:');
  assert.equal(url.host, 'totp');
  assert.equal(decodeURIComponent(url.pathname), '/Slipway (apps.example.com):ann@example.com');
  assert.equal(url.searchParams.get('secret'), 'GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ');
  assert.equal(url.searchParams.get('issuer'), 'Slipway (apps.example.com)');
  assert.equal(url.searchParams.get('digits'), '6');
  assert.equal(url.searchParams.get('period'), '30');
  assert.equal(url.searchParams.get('algorithm'), 'SHA1');
});
