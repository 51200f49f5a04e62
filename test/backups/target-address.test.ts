// Unit tests of the private-address rule for outbound targets: loopback, private, link-local and metadata addresses refused unless allowed, checked after resolution.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { refusedTarget } from '../../src/backups/target-address.js';

describe('target address rule', () => {
  test('loopback, private, link-local and metadata endpoints are refused naming the setting; allowed with it', async () => {
    for (const url of ['http://127.0.0.1:9000', 'http://10.1.2.3', 'http://169.254.169.254', 'http://[::1]:9000', 'http://192.168.1.1', 'http://localhost:9000']) {
      const refused = await refusedTarget(new URL(url), false);
      assert.match(refused ?? '', /SLIPWAY_ALLOW_PRIVATE_TARGETS/, url);
      assert.equal(await refusedTarget(new URL(url), true), undefined, url);
    }
  });

  test('a public address passes; a name that does not resolve is refused', async () => {
    assert.equal(await refusedTarget(new URL('https://93.184.215.14'), false), undefined);
    assert.match((await refusedTarget(new URL('https://no-such-host.invalid'), true)) ?? '', /does not resolve/);
  });
});
