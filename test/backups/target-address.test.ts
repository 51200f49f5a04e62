// Unit tests of the private-address rule for outbound targets: loopback, private, link-local and metadata addresses refused unless allowed, checked after resolution; a host that does not resolve at a destination's creation and at its use.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { refusedTarget } from '../../src/backups/target-address.js';
import { checkS3 } from '../../src/backups/destinations.js';
import { DestinationError } from '../../src/backups/object-store.js';
import { s3ObjectStore } from '../../src/backups/s3-object-store.js';
import { DomainError } from '../../src/core/errors.js';

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

  test('a host that does not resolve: recorded when private targets are allowed (nothing to refuse), refused otherwise; every use fails at step resolve', async () => {
    const body = { endpoint: 'https://no-such-host.invalid:9000', bucket: 'backups', access_key_id: 'AKIA' };
    const settings = await checkS3({ allowPrivateTargets: true }, body, undefined);
    assert.equal(settings.endpoint, 'https://no-such-host.invalid:9000');
    await assert.rejects(checkS3({ allowPrivateTargets: false }, body, undefined), (err: unknown) => err instanceof DomainError && err.code === 'validation_error' && /endpoint refused: .*does not resolve/.test(err.message));
    // A change of an existing destination reads the same way.
    const base = await checkS3({ allowPrivateTargets: true }, { ...body, endpoint: 'http://127.0.0.1:9000' }, undefined);
    assert.equal((await checkS3({ allowPrivateTargets: true }, { endpoint: body.endpoint }, base)).endpoint, body.endpoint);
    for (const allowPrivate of [true, false]) {
      const store = s3ObjectStore(settings, 'secret', allowPrivate);
      await assert.rejects(store.reach(AbortSignal.timeout(20_000)), (err: unknown) => err instanceof DestinationError && err.step === 'resolve' && /does not resolve/.test(err.message), String(allowPrivate));
    }
  });
});
