// The engine's network for app containers, ensured by several releases at once (two first deploys): one network, never two of the same name.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, test } from 'node:test';
import { createDockerEngine } from '../../src/runtime/docker/docker-engine.js';
import { LABEL_MANAGED } from '../../src/runtime/engine.js';

const runId = randomUUID();
const LABEL_RUN = 'dev.slipway.test-run';
const labels = { [LABEL_MANAGED]: 'true', [LABEL_RUN]: runId };
const engine = createDockerEngine();

after(async () => {
  for (const network of await engine.listNetworks({ [LABEL_RUN]: runId })) await engine.removeNetwork(network.id);
});

test('concurrent ensureNetwork calls for one name create one network', async () => {
  const name = `slipway-test-${runId}-race`;
  const results = await Promise.all(Array.from({ length: 6 }, () => engine.ensureNetwork({ name, labels, isolated: true })));
  assert.equal(new Set(results.map((r) => r.id)).size, 1, 'every caller got the same network');
  const listed = await engine.listNetworks({ [LABEL_RUN]: runId });
  assert.deepEqual(listed.map((n) => n.name), [name], 'one network of that name exists');
  // And it is usable by name afterwards (a second network of the name would make it ambiguous).
  assert.equal((await engine.ensureNetwork({ name, labels, isolated: true })).id, results[0]!.id);
});
