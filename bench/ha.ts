// Benchmark: several instances on one PostgreSQL (issue 24): route propagation, failures while one of three is killed, leader takeover.
// Run: SLIPWAY_TEST_DATABASE_URL=postgres://… node dist/bench/ha.js [--rounds 40] [--seconds 20] [--rate 40]
import http from 'node:http';
import { parseArgs } from 'node:util';
import { appRequest, busyboxArchive, createArchiveApp, deployAndWait } from '../test/helpers/apps.js';
import { startCluster, type Cluster, type Instance } from '../test/helpers/instances.js';
import { loginAs, dropClusterDatabase, testDatabase, ADMIN_EMAIL, ADMIN_PASSWORD } from '../test/helpers/server.js';

const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '40' },
    seconds: { type: 'string', default: '20' },
    rate: { type: 'string', default: '40' },
  },
});
const rounds = Number(values.rounds);
const seconds = Number(values.seconds);
const rate = Number(values.rate);

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
const percentile = (sorted: number[], p: number): number => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? NaN;

/** Polls `instance`'s edge every 2 ms until the app answers `status`; the milliseconds it took from `since`. */
async function until(instance: Instance, subdomain: string, status: number, since: number): Promise<number> {
  const agent = new http.Agent({ keepAlive: true });
  try {
    for (;;) {
      const res = await appRequest(instance.port, subdomain, { agent }).catch(() => ({ status: 0 }));
      if (res.status === status) return performance.now() - since;
      if (performance.now() - since > 30_000) throw new Error(`no ${status} within 30 s on ${instance.name}`);
      await sleep(2);
    }
  } finally {
    agent.destroy();
  }
}

async function leaderUrl(via: Instance, token: string): Promise<string | undefined> {
  const res = await via.request('GET', '/api/v1/instances', { token }).catch(() => undefined);
  return (res?.json as Array<{ url: string; leader: boolean }> | undefined)?.find((i) => i.leader)?.url;
}

/** A paced load: `rate` requests a second, round robin over `targets`, for `ms`; failures counted per target. */
async function pacedLoad(targets: Instance[], ms: number, send: (target: Instance) => Promise<number>): Promise<Map<string, { ok: number; failed: number }>> {
  const counts = new Map(targets.map((t) => [t.name, { ok: 0, failed: 0 }]));
  const inflight: Array<Promise<void>> = [];
  const start = performance.now();
  for (let i = 0; performance.now() - start < ms; i++) {
    const target = targets[i % targets.length] as Instance;
    inflight.push(
      send(target).then(
        (status) => {
          const c = counts.get(target.name);
          if (c !== undefined) status >= 200 && status < 500 ? c.ok++ : c.failed++;
        },
        () => {
          const c = counts.get(target.name);
          if (c !== undefined) c.failed++;
        },
      ),
    );
    const next = start + ((i + 1) * 1000) / rate;
    await sleep(Math.max(0, next - performance.now()));
  }
  await Promise.all(inflight);
  return counts;
}

async function main(): Promise<void> {
  const database = await testDatabase();
  if (database === undefined) throw new Error('set SLIPWAY_TEST_DATABASE_URL to a PostgreSQL role that may create databases');
  let cluster: Cluster | undefined;
  try {
    cluster = await startCluster(database.url, 3);
    const [a, b, c] = cluster.instances as [Instance, Instance, Instance];
    const token = await loginAs(a.url, ADMIN_EMAIL, ADMIN_PASSWORD);
    const built = await busyboxArchive({ body: 'ha bench\n' });
    const app = await createArchiveApp(a, token, built.archive);
    const deployed = await deployAndWait(a, token, app.id);
    if (deployed.status !== 200) throw new Error(`deploy failed: ${deployed.text}`);
    await until(b, app.subdomain, 200, performance.now());

    // 1. Route propagation: a stop on A until B's edge answers 503 (and a restart until 200).
    const stops: number[] = [];
    const starts: number[] = [];
    for (let i = 0; i < rounds; i++) {
      const stopAt = performance.now();
      const stopped = await a.request('POST', `/api/v1/deployments/${app.id}/stop`, { token });
      if (stopped.status !== 200) throw new Error(`stop: ${stopped.text}`);
      // Measured from the stop's answer: the route changes on A as the stop completes.
      stops.push(await until(b, app.subdomain, 503, performance.now()));
      void stopAt;
      const restarted = await a.request('POST', `/api/v1/deployments/${app.id}/restart`, { token });
      if (restarted.status !== 200) throw new Error(`restart: ${restarted.text}`);
      starts.push(await until(b, app.subdomain, 200, performance.now()));
    }
    stops.sort((x, y) => x - y);
    starts.sort((x, y) => x - y);
    console.log(`route propagation, stop on A → 503 on B (${rounds} rounds): median ${percentile(stops, 50).toFixed(1)} ms, p99 ${percentile(stops, 99).toFixed(1)} ms, max ${(stops.at(-1) ?? NaN).toFixed(1)} ms`);
    console.log(`route propagation, restart on A → 200 on B: median ${percentile(starts, 50).toFixed(1)} ms, p99 ${percentile(starts, 99).toFixed(1)} ms`);

    // 2. Failures while one of three (C, not the leader) is killed mid-load.
    const apiAgent = new http.Agent({ keepAlive: true });
    const appAgent = new http.Agent({ keepAlive: true });
    const killAt = (seconds * 1000) / 2;
    const killer = sleep(killAt).then(() => cluster?.kill(c));
    const [api, apps] = await Promise.all([
      pacedLoad([a, b, c], seconds * 1000, async (t) => (await t.request('GET', '/api/v1/deployments', { token })).status),
      pacedLoad([a, b], seconds * 1000, async (t) => (await appRequest(t.port, app.subdomain, { agent: appAgent })).status),
    ]);
    await killer;
    apiAgent.destroy();
    appAgent.destroy();
    const show = (m: Map<string, { ok: number; failed: number }>): string => [...m].map(([name, v]) => `${name}: ${v.ok} ok, ${v.failed} failed`).join('; ');
    console.log(`paced load ${rate}/s for ${seconds} s, instance 2 killed -9 at ${killAt / 1000} s`);
    console.log(`  API (round robin over the three): ${show(api)}`);
    console.log(`  app (through the two surviving edges): ${show(apps)}`);

    // 3. Leader takeover: kill -9 of the leader until another instance is listed as the leader.
    await cluster.start(c);
    const leader = await leaderUrl(b, token);
    const leaderInstance = cluster.instances.find((i) => i.url === leader);
    if (leaderInstance === undefined) throw new Error('no leader listed');
    const witness = cluster.instances.find((i) => i !== leaderInstance) as Instance;
    const killed = performance.now();
    await cluster.kill(leaderInstance);
    for (;;) {
      const now = await leaderUrl(witness, token);
      if (now !== undefined && now !== leader) break;
      if (performance.now() - killed > 60_000) throw new Error('no takeover within 60 s');
      await sleep(20);
    }
    console.log(`leader takeover (kill -9 → another instance listed as leader): ${((performance.now() - killed) / 1000).toFixed(2)} s`);

    // 4. Build takeover: kill -9 of the instance running a build until the new leader's log says it builds it again.
    await cluster.start(leaderInstance);
    const newLeaderUrl = await leaderUrl(witness, token);
    const newLeader = cluster.instances.find((i) => i.url === newLeaderUrl) as Instance;
    const builder = cluster.instances.find((i) => i !== newLeader) as Instance;
    const slow = await busyboxArchive({ body: 'slow\n', extraDockerfile: 'RUN echo slow step && sleep 120' });
    const slowApp = await createArchiveApp(builder, token, slow.archive);
    const started = await builder.request('POST', `/api/v1/deployments/${slowApp.id}/deploy`, { token });
    const buildId = started.json.id as string;
    for (;;) {
      const log = await builder.request('GET', `/api/v1/deployments/${slowApp.id}/builds/${buildId}/logs`, { token });
      if (/slow step/.test(log.text)) break;
      await sleep(200);
    }
    const builderKilled = performance.now();
    await cluster.kill(builder);
    for (;;) {
      const log = await newLeader.request('GET', `/api/v1/deployments/${slowApp.id}/builds/${buildId}/logs`, { token }).catch(() => undefined);
      if (log !== undefined && /was lost/.test(log.text)) break;
      if (performance.now() - builderKilled > 120_000) throw new Error('no build takeover within 120 s');
      await sleep(100);
    }
    console.log(`build takeover (kill -9 of the building instance → its build started again on the leader): ${((performance.now() - builderKilled) / 1000).toFixed(2)} s`);
    await newLeader.request('POST', `/api/v1/deployments/${slowApp.id}/cancel`, { token });
  } finally {
    await cluster?.close();
    await dropClusterDatabase(database);
  }
}

await main();
