// Unit tests: the Swarm specs (Engine API 1.41) of a managed database pinned to its node and of a compose set's other service: placement, update order, dnsrr without ports, networks and health checks.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { ReleaseTarget } from '../../src/runtime/app-runtime.js';
import type { SetService } from '../../src/runtime/release-set.js';
import { pinnedServiceName, pinnedServiceSpec } from '../../src/runtime/swarm/pinned-service-spec.js';
import { companionName, companionSpec, LABEL_SET_DEPLOYMENT, LABEL_SET_SERVICE } from '../../src/runtime/swarm/swarm-set.js';
import { LABEL_DEPLOYMENT } from '../../src/runtime/engine.js';

const hosted = {
  instanceId: 'inst1234abcd',
  serviceId: 'db-0001',
  image: 'slipway-stand-in/redis:7',
  env: { A: '1' },
  command: ['redis-server', '--appendonly', 'yes'],
  port: 6379,
  dataDir: '/data',
  aliases: ['cache'],
  memoryBytes: 256 * 1024 * 1024,
  nanoCpus: 500_000_000,
  pidsLimit: 1024,
  capabilities: ['CHOWN', 'SETUID'],
  subnetPool: '10.213.0.0/16',
};

describe('a managed database as a swarm service', () => {
  const spec = pinnedServiceSpec({ spec: hosted, imageId: 'sha256:abc', nodeId: 'node-1', network: 'net-1', volume: 'vol-1', probeSource: '/bin/busybox', forceUpdate: 3 });
  const task = spec.TaskTemplate ?? {};
  const container = task.ContainerSpec ?? {};

  test('one replica pinned to the node of its volume, stop-first, published nowhere (dnsrr)', () => {
    assert.equal(spec.Name, pinnedServiceName('inst1234abcd', 'db-0001'));
    assert.deepEqual(spec.Mode, { Replicated: { Replicas: 1 } });
    assert.deepEqual(task.Placement?.Constraints, ['node.id==node-1']);
    assert.equal((spec['UpdateConfig'] as { Order: string }).Order, 'stop-first');
    assert.deepEqual(spec['EndpointSpec'], { Mode: 'dnsrr' });
    assert.equal(task.ForceUpdate, 3);
  });

  test('the local image by id, its command as Args, its volume and the relay busybox mounted, its alias on its own network', () => {
    assert.equal(container.Image, 'sha256:abc');
    assert.deepEqual(container['Args'], ['redis-server', '--appendonly', 'yes']);
    assert.deepEqual(container['Env'], ['A=1']);
    assert.deepEqual(container['CapabilityDrop'], ['ALL']);
    assert.deepEqual(container['CapabilityAdd'], ['CHOWN', 'SETUID']);
    const mounts = container['Mounts'] as Array<{ Type: string; Source: string; Target: string; ReadOnly: boolean }>;
    assert.deepEqual(mounts.map((m) => [m.Type, m.Source, m.Target, m.ReadOnly]), [['volume', 'vol-1', '/data', false], ['bind', '/bin/busybox', '/.slipway/busybox', true]]);
    assert.deepEqual(task['Networks'], [{ Target: 'net-1', Aliases: ['cache'] }]);
    assert.deepEqual(task['Resources'], { Limits: { NanoCPUs: 500_000_000, MemoryBytes: 256 * 1024 * 1024, Pids: 1024 } });
  });
});

describe("a compose set's other service as a swarm service", () => {
  const target: ReleaseTarget = {
    instanceId: 'inst1234abcd',
    deploymentId: 'dep-1',
    buildId: 'build-1',
    image: 'web:1',
    healthCheckPath: null,
    memoryBytes: 1,
    nanoCpus: 2,
    pidsLimit: 3,
    vars: [{ key: 'SECRET', value: 's', secret: true, updated_at: '' }, { key: 'PORT', value: '9999', secret: false, updated_at: '' }],
    volumes: [],
    replicas: 1,
    networks: ['db-net'],
  };
  const service: SetService = {
    name: 'api',
    image: 'api:1',
    command: ['serve'],
    entrypoint: ['/init'],
    environment: { SECRET: 'own', MODE: 'x' },
    healthcheck: { test: ['CMD', 'true'], intervalMs: 1000, timeoutMs: 3000, retries: 2, startPeriodMs: 500 },
    dependsOn: [],
    replicas: 3,
    ports: [8081],
    volumes: [],
    user: '1000',
    workingDir: '/app',
  };
  const spec = companionSpec({ target, service, name: companionName('slipway-abc-dep-1', 'api'), release: 'r1', image: 'reg/slipway-dep-1:build-1-api', network: 'dep-net', mounts: [], pinnedNode: null, forceUpdate: 1 });
  const task = spec.TaskTemplate ?? {};
  const container = task.ContainerSpec ?? {};

  test('its replicas, start-first with rollback, dnsrr and no port; labelled as a set member, never as the deployment', () => {
    assert.equal(spec.Name, 'slipway-abc-dep-1-api');
    assert.deepEqual(spec.Mode, { Replicated: { Replicas: 3 } });
    assert.deepEqual(spec['UpdateConfig'], { Parallelism: 1, Delay: 1_000_000_000, FailureAction: 'rollback', Monitor: 5_000_000_000, MaxFailureRatio: 0, Order: 'start-first' });
    assert.deepEqual(spec['EndpointSpec'], { Mode: 'dnsrr' });
    assert.equal(spec.Labels?.[LABEL_SET_DEPLOYMENT], 'dep-1');
    assert.equal(spec.Labels?.[LABEL_SET_SERVICE], 'api');
    assert.equal(spec.Labels?.[LABEL_DEPLOYMENT], undefined);
  });

  test('its name on the deployment network and the linked databases; entrypoint, command, user, directory; the variables over its environment, without PORT', () => {
    assert.deepEqual(task['Networks'], [{ Target: 'dep-net', Aliases: ['api'] }, { Target: 'db-net' }]);
    assert.deepEqual(container['Command'], ['/init']);
    assert.deepEqual(container['Args'], ['serve']);
    assert.equal(container['User'], '1000');
    assert.equal(container['Dir'], '/app');
    assert.deepEqual(container['Env'], ['SECRET=s', 'MODE=x']);
    assert.deepEqual(container['Healthcheck'], { Test: ['CMD', 'true'], Interval: 1_000_000_000, Timeout: 3_000_000_000, Retries: 2, StartPeriod: 500_000_000 });
  });
});
