// Unit tests: password hashes name their scrypt parameters, so a hash of either cost verifies whatever cost new hashes use now.
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { hashPassword, useFastPasswordHashing, verifyPassword } from '../../src/domain/password-hashing.js';

after(() => useFastPasswordHashing(false));

test('the standard cost is scrypt N=2^15, r=8, p=3; the test-suite cost N=2^10, p=1; each verifies under the other', async () => {
  useFastPasswordHashing(false);
  const standard = await hashPassword('correct horse');
  assert.match(standard, /^scrypt\$32768\$8\$3\$[^$]+\$[^$]+$/);
  useFastPasswordHashing(true);
  const fast = await hashPassword('correct horse');
  assert.match(fast, /^scrypt\$1024\$8\$1\$[^$]+\$[^$]+$/);
  assert.equal(await verifyPassword('correct horse', standard), true);
  assert.equal(await verifyPassword('wrong horse', standard), false);
  useFastPasswordHashing(false);
  assert.equal(await verifyPassword('correct horse', fast), true);
  assert.equal(await verifyPassword('wrong horse', fast), false);
});
