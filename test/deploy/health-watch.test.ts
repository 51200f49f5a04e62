// Unit tests of the health watcher over a fake runtime: the last line comes from the crashed replica's own output when the runtime keeps it apart (swarm's ended task), masked; else from the release's logs.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AppEvents, type AppCrashedEvent } from '../../src/domain/app-events.js';
import type { ReleaseExit } from '../../src/domain/app-health.js';
import { HealthWatch, type HealthWatchDeps } from '../../src/deploy/health-watch.js';

const t0 = Date.parse('2026-11-29T12:00:00Z');
const exits: ReleaseExit[] = [1, 2, 3].map((n) => ({ key: `task-${n}`, exitCode: 3, at: t0 - 10_000 + n * 2_000 }));
const secret = { key: 'API_TOKEN', value: 'tok-s3cr3t', secret: true, updated_at: '2026-11-29T00:00:00Z' };

async function* text(...chunks: string[]): AsyncIterable<string> {
  yield* chunks;
}

/** A watcher of one live release `svc/r1` crashing three times, over `runtime`'s logs; resolves with its health and the events told. */
async function lookOnce(runtime: Pick<HealthWatchDeps['runtime'], 'releaseLogs' | 'exitLogs'>): Promise<{ health: ReturnType<HealthWatch['of']>; events: AppCrashedEvent[] }> {
  const events = new AppEvents((err) => {
    throw err;
  });
  const told: AppCrashedEvent[] = [];
  events.on('app.crashed', (event) => told.push(event));
  const watch = new HealthWatch({
    store: { liveContainers: async () => [{ deploymentId: 'd1', subdomain: 'hello', buildId: 'b1', containerId: 'svc/r1', upstreams: [] }] },
    runtime: { ...runtime, releaseExits: async (_instance, ids) => new Map(ids.map((id) => [id, exits])) },
    configs: { current: async () => [secret], buildConfig: async () => [] },
    instanceId: 'i1',
    events,
    announces: () => true,
    log: () => undefined,
    now: () => t0,
  });
  await watch.look();
  return { health: watch.of('d1'), events: told };
}

test("the ended replica's own last line (the latest exit's), its secret masked, when the runtime keeps each exit's output", async () => {
  const asked: string[] = [];
  const { health, events } = await lookOnce({
    exitLogs: (key) => {
      asked.push(key);
      return text('starting\n', `boom: token ${secret.value}\n\n`);
    },
    releaseLogs: () => text('listening on 8080\n'),
  });
  assert.deepEqual(asked, ['task-3']);
  assert.deepEqual(health, { state: 'crash_loop', restarts: 3, last_exit_code: 3, last_line: 'boom: token [redacted]', since: new Date(exits[0]?.at ?? 0).toISOString() });
  assert.equal(events.length, 1);
  assert.equal(events[0]?.lastLine, 'boom: token [redacted]');
});

test("without it, the release's logs", async () => {
  const { health } = await lookOnce({ releaseLogs: () => text('boom\n') });
  assert.equal(health.last_line, 'boom');
});
