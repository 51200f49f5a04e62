// Unit tests of the subnets service networks take from their pool (src/runtime/service.ts).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { serviceSubnet } from '../../src/runtime/service.js';

test('a service subnet is a /26 inside the pool; successive attempts walk the pool and wrap around', () => {
  const seen = new Set<string>();
  for (let attempt = 0; attempt < 4; attempt++) {
    const subnet = serviceSubnet('10.213.0.0/24', 'some-id', attempt);
    assert.match(subnet, /^10\.213\.0\.(0|64|128|192)\/26$/);
    seen.add(subnet);
  }
  assert.equal(seen.size, 4, 'four /26 in a /24, each tried once');
  assert.equal(serviceSubnet('10.213.0.0/24', 'some-id', 4), serviceSubnet('10.213.0.0/24', 'some-id', 0));
  assert.equal(serviceSubnet('10.0.0.0/8', 'x', 0), serviceSubnet('10.0.0.0/8', 'x', 0), 'stable for one id');
  assert.match(serviceSubnet('10.0.0.0/8', 'x', 0), /^10\.\d+\.\d+\.(0|64|128|192)\/26$/);
  assert.equal(serviceSubnet('192.168.7.64/26', 'any', 3), '192.168.7.64/26');
});
