// Benchmark (issue 23 item 5): seconds user B's short build takes while user A floods the two build slots with four `sleep 25` builds, fair scheduler vs first come, first served. Run: node dist/bench/fair-builds.js [--sleep 25] [--policy fair,fifo]
import { Semaphore } from '../src/deploy/concurrency.js';
import { FairBuildSlots, type BuildSlots } from '../src/deploy/fair-build-slots.js';
import { busyboxArchive, createArchiveApp, deployAndWait, eventually } from '../test/helpers/apps.js';
import { startTestServer } from '../test/helpers/server.js';

const arg = (name: string, fallback: string): string => {
  const index = process.argv.indexOf(name);
  return index === -1 ? fallback : (process.argv[index + 1] ?? fallback);
};
const sleepSeconds = Number(arg('--sleep', '25'));
const policies = arg('--policy', 'fifo,fair').split(',');

/** The scheduler before issue 23: one queue, first come, first served, whoever's build it is. */
function fifoSlots(slots: number): BuildSlots {
  const semaphore = new Semaphore(slots);
  return { acquire: (_userId, signal) => semaphore.acquire(signal), running: () => new Map(), get waiting() { return semaphore.waiting; } };
}

async function measure(policy: string): Promise<number> {
  const buildSlots = policy === 'fair' ? new FairBuildSlots(2) : fifoSlots(2);
  const ts = await startTestServer({ SLIPWAY_MAX_CONCURRENT_BUILDS: '2' }, undefined, { buildSlots });
  try {
    const alice = await ts.newUser('flooder');
    const bob = await ts.newUser('neighbour');
    const slow = await busyboxArchive({ body: 'slow\n', extraDockerfile: `RUN sleep ${sleepSeconds}` });
    const flood: Array<{ id: string; buildId: string }> = [];
    for (let i = 0; i < 4; i += 1) {
      const { id } = await createArchiveApp(ts, alice.token, slow.archive);
      flood.push({ id, buildId: (await ts.request('POST', `/api/v1/deployments/${id}/deploy`, { token: alice.token })).json.id });
    }
    const first = flood[0] as { id: string; buildId: string };
    await eventually(
      async () => ((await ts.request('GET', `/api/v1/deployments/${first.id}/builds/${first.buildId}/logs`, { token: alice.token })).text.includes('RUN sleep') ? true : undefined),
      120_000,
      "A's first build to reach its slow step",
    );
    const quick = await busyboxArchive({ body: 'quick\n', extraDockerfile: 'RUN sleep 3' });
    const app = await createArchiveApp(ts, bob.token, quick.archive);
    const started = performance.now();
    const done = await deployAndWait(ts, bob.token, app.id);
    const seconds = (performance.now() - started) / 1000;
    if (done.json.status !== 'succeeded') throw new Error(`B's build: ${done.text}`);
    for (const a of flood) await ts.request('POST', `/api/v1/deployments/${a.id}/stop`, { token: alice.token });
    return seconds;
  } finally {
    await ts.close();
  }
}

for (const policy of policies) {
  const seconds = await measure(policy);
  console.log(`${policy}: B's build (RUN sleep 3) took ${seconds.toFixed(1)} s while A's four RUN sleep ${sleepSeconds} builds were queued`);
}
