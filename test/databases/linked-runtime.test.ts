// The runtime with linked databases passes every call of the runtime port through: a member it forgot would silently turn a feature off (the health watch reads releaseExits).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { withLinkedDatabases } from '../../src/databases/linked-runtime.js';
import type { AppRuntime, ReleaseTarget } from '../../src/runtime/app-runtime.js';

/** A runtime whose every member records its name and arguments and answers with its own name. */
function recordingRuntime(calls: Array<[string, unknown[]]>): AppRuntime {
  const member = (name: string) => (...args: unknown[]) => {
    calls.push([name, args]);
    return Promise.resolve(name);
  };
  const runtime: Record<string, unknown> = {};
  for (const name of ['startRelease', 'resumeRelease', 'inspectReleases', 'stopRelease', 'removeRelease', 'removeDeployment', 'releaseLogs', 'releaseExits', 'releaseStats']) {
    runtime[name] = member(name);
  }
  return runtime as unknown as AppRuntime;
}

test('every member of the runtime is there and reaches the wrapped runtime with its arguments', async () => {
  const calls: Array<[string, unknown[]]> = [];
  const inner = recordingRuntime(calls);
  const wrapped = withLinkedDatabases(inner, async () => ({ vars: [], networks: [] }), async () => []);
  // addedSecrets is the wrapper's own (the links' values to mask), whether or not the runtime has one.
  assert.deepEqual(Object.keys(wrapped).sort(), [...Object.keys(inner), 'addedSecrets'].sort());
  for (const name of Object.keys(inner)) {
    if (name === 'startRelease') continue;
    const args = [`${name}-first`];
    const answer = await (wrapped as unknown as Record<string, (...a: unknown[]) => unknown>)[name]!(...args);
    assert.equal(answer, name);
    const [called, passed] = calls.at(-1)!;
    assert.equal(called, name);
    assert.deepEqual(passed.slice(0, args.length), args, name);
  }
});

test('a release gets its links: the link wins over a variable of the same name, and joins the database networks', async () => {
  const calls: Array<[string, unknown[]]> = [];
  const wrapped = withLinkedDatabases(recordingRuntime(calls), async (deploymentId) => {
    assert.equal(deploymentId, 'd1');
    return { vars: [{ key: 'DATABASE_URL', value: 'postgres://db/app', secret: true, updated_at: '2026-11-28T00:00:00.000Z' }], networks: ['net-db'] };
  }, async () => []);
  const target = { deploymentId: 'd1', vars: [{ key: 'DATABASE_URL', value: 'old', secret: false }, { key: 'A', value: '1', secret: false }], networks: ['own'] } as unknown as ReleaseTarget;
  await wrapped.startRelease(target, {} as Parameters<AppRuntime['startRelease']>[1]);
  const [name, args] = calls.at(-1)!;
  assert.equal(name, 'startRelease');
  const started = args[0] as { vars: Array<{ key: string; value: string }>; networks: string[] };
  assert.deepEqual(started.vars.map((v) => [v.key, v.value]), [['A', '1'], ['DATABASE_URL', 'postgres://db/app']]);
  assert.deepEqual(started.networks, ['own', 'net-db']);
});

test("a job's run gets the links as a release does (decisions §22: its linked databases), its command and limits untouched", async () => {
  const calls: Array<[string, unknown[]]> = [];
  const runtime = { ...recordingRuntime(calls), runOnce: (...args: unknown[]) => (calls.push(['runOnce', args]), Promise.resolve({ started: true, exitCode: 0, timedOut: false })) } as unknown as AppRuntime;
  const wrapped = withLinkedDatabases(runtime, async () => ({ vars: [{ key: 'DATABASE_URL', value: 'postgres://db/app', secret: true, updated_at: '2026-11-28T00:00:00.000Z' }], networks: ['net-db'] }), async () => []);
  assert.ok(wrapped.runOnce !== undefined, 'runOnce is passed through');
  const target = { deploymentId: 'd1', vars: [{ key: 'A', value: '1', secret: false }], networks: ['own'], command: ['sh', '-c', 'true'], memoryBytes: 268435456, runId: 'r1' };
  await wrapped.runOnce(target as unknown as Parameters<NonNullable<AppRuntime['runOnce']>>[0], { timeoutMs: 1000 } as Parameters<NonNullable<AppRuntime['runOnce']>>[1]);
  const [name, args] = calls.at(-1)!;
  assert.equal(name, 'runOnce');
  const ran = args[0] as typeof target;
  assert.deepEqual(ran.vars.map((v) => [v.key, v.value]), [['A', '1'], ['DATABASE_URL', 'postgres://db/app']]);
  assert.deepEqual(ran.networks, ['own', 'net-db']);
  assert.deepEqual([ran.command, ran.memoryBytes, ran.runId], [target.command, target.memoryBytes, 'r1']);
});

test("the links' URLs and passwords are named for masking, after whatever the wrapped runtime adds", async () => {
  const asked: string[] = [];
  const links = async (deploymentId: string): Promise<string[]> => (asked.push(deploymentId), ['postgres://app:pw-1234@db/app', 'pw-1234']);
  const bare = withLinkedDatabases(recordingRuntime([]), async () => ({ vars: [], networks: [] }), links);
  assert.deepEqual(await bare.addedSecrets!('d1'), ['postgres://app:pw-1234@db/app', 'pw-1234']);
  const inner = { ...recordingRuntime([]), addedSecrets: async () => ['inner-secret'] } as AppRuntime;
  const layered = withLinkedDatabases(inner, async () => ({ vars: [], networks: [] }), links);
  assert.deepEqual(await layered.addedSecrets!('d2'), ['inner-secret', 'postgres://app:pw-1234@db/app', 'pw-1234']);
  assert.deepEqual(asked, ['d1', 'd2']);
});
