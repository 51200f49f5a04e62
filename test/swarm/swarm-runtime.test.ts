// The swarm runtime end to end on the real test cluster (decisions §16): Slipway on the manager's engine deploys replicas over three nodes, redeploys and rolls back through the edge, and follows a drain.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import Database from 'better-sqlite3';
import { after, before, describe, test } from 'node:test';
import { createDockerClient } from '../../src/runtime/docker/docker-engine.js';
import { contentHash, guardImageFiles } from '../../src/runtime/swarm/guard-image.js';
import { reconcileNodeGuard } from '../../src/runtime/swarm/guard-service.js';
import type { AppCrashedEvent } from '../../src/domain/app-events.js';
import { appRequest, busyboxScriptArchive, createArchiveApp, eventually, upload } from '../helpers/apps.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { busyboxOnManager, clusterScript, nodeDocker, nodeDockerSucceeds, whoAppArchive, type ClusterLayout, type ClusterScript } from '../helpers/swarm-cluster.js';

describe('swarm runtime', () => {
  let cluster: ClusterScript;
  let layout: ClusterLayout | undefined;
  let ts: TestServer | undefined;
  let token = '';
  let id = '';
  let subdomain = '';

  /** The live build's upstreams as the edge was last given them (the database row the route follows). */
  const liveUpstreams = (): Array<{ host: string; port: number }> => {
    assert.ok(ts !== undefined);
    const db = new Database(path.join(ts.dataDir, 'slipway.db'), { readonly: true });
    try {
      const row = db.prepare('select b.upstreams as upstreams from deployments d join builds b on b.id = d.live_build_id where d.id = ?').get(id) as { upstreams: string | null } | undefined;
      return JSON.parse(row?.upstreams ?? '[]') as Array<{ host: string; port: number }>;
    } finally {
      db.close();
    }
  };
  /** The live release's id of a deployment, as recorded. */
  const liveReleaseOf = (deployment: string): unknown => {
    assert.ok(ts !== undefined);
    const db = new Database(path.join(ts.dataDir, 'slipway.db'), { readonly: true });
    try {
      return db.prepare('select b.container_id as release from deployments d join builds b on b.id = d.live_build_id where d.id = ?').get(deployment);
    } finally {
      db.close();
    }
  };
  const nodes = async (): Promise<Array<{ id: string; address: string; availability: string; state: string; replicas: number }>> => {
    assert.ok(ts !== undefined);
    const res = await ts.request('GET', '/api/v1/nodes', { token: ts.adminToken });
    assert.equal(res.status, 200, res.text);
    return res.json as Array<{ id: string; address: string; availability: string; state: string; replicas: number }>;
  };
  /** Requests through the edge until three replicas (their hostnames, `/who.txt`) have answered; every answer is a 200. */
  const threeReplicasAnswer = (what: string): Promise<Set<string>> =>
    eventually(async () => {
      const seen = new Set<string>();
      for (let i = 0; i < 12; i++) {
        const res = await appRequest(ts?.port ?? 0, subdomain, { path: '/who.txt' });
        assert.equal(res.status, 200, res.body);
        seen.add(res.body.trim());
      }
      return seen.size === 3 ? seen : undefined;
    }, 60_000, what);
  /** Requests through the edge until stopped; every answer that is not 200 is a failure. */
  const load = (): { stop: () => Promise<{ requests: number; failures: string[]; bodies: Set<string> }> } => {
    let stopped = false;
    const failures: string[] = [];
    const bodies = new Set<string>();
    let requests = 0;
    const visitor = async (): Promise<void> => {
      while (!stopped) {
        const res = await appRequest(ts?.port ?? 0, subdomain, { timeoutMs: 30_000 }).catch((err: unknown) => ({ status: 0, body: String(err) }));
        requests += 1;
        if (res.status !== 200) failures.push(`${res.status} ${res.body.slice(0, 200)}`);
        else bodies.add(res.body);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    };
    const visitors = [visitor(), visitor()];
    return {
      stop: async () => {
        stopped = true;
        await Promise.all(visitors);
        return { requests, failures, bodies };
      },
    };
  };

  before(async () => {
    cluster = await clusterScript();
    layout = await cluster.up(process.pid);
    const manager = layout.nodes[0];
    assert.ok(manager !== undefined);
    // The busybox base apps build FROM, copied to the manager while the server starts (kept at once:
    // the after hook closes it even when the copy fails).
    await Promise.all([busyboxOnManager(layout), startTestServer({
      DOCKER_HOST: `unix://${manager.socket}`,
      SLIPWAY_RUNTIME: 'swarm',
      SLIPWAY_REGISTRY: layout.registry,
      // Builds need no network; the build sandbox's firewall belongs to the manager's own namespace.
      SLIPWAY_BUILD_NETWORK: 'none',
      SLIPWAY_STARTUP_TIMEOUT_SECONDS: '15',
      // The workers' engines, for the figures of the replicas they run (each node's socket is on this host).
      SLIPWAY_SWARM_NODE_ENGINES: layout.nodes.slice(1).map((n) => `${n.address}=unix://${n.socket}`).join(','),
    }).then((server) => (ts = server))]);
    assert.ok(ts !== undefined);
    token = (await ts.newUser('swarm')).token;
  });
  after(async () => {
    await ts?.close();
    if (layout !== undefined) await cluster.down(layout);
  });

  test('3 replicas run one per node, pulled from the registry, and the edge serves each of them', async () => {
    assert.ok(ts !== undefined && layout !== undefined);
    subdomain = `swarm-${process.pid}`;
    const created = await ts.request('POST', '/api/v1/deployments', { token, body: { name: subdomain, subdomain, source_type: 'archive', replicas: 3 } });
    assert.equal(created.status, 201, created.text);
    id = created.json.id as string;
    assert.equal((await upload(ts, token, id, await whoAppArchive('first\n'))).status, 200);
    const deployed = await ts.request('POST', `/api/v1/deployments/${id}/deploy?wait=true`, { token });
    assert.equal(deployed.status, 200, deployed.text);

    const upstreams = liveUpstreams();
    assert.equal(upstreams.length, 3);
    assert.deepEqual(new Set(upstreams.map((u) => u.host)), new Set(layout.nodes.map((n) => n.address)), 'one replica on each node');
    assert.deepEqual((await nodes()).map((n) => n.replicas), [1, 1, 1]);
    // Workers ran the image: they pulled it from the registry (the build happened on the manager alone).
    for (const worker of layout.nodes.slice(1)) {
      const images = nodeDocker(worker, ['image', 'ls', '--format', '{{.Repository}}:{{.Tag}}']);
      assert.match(images, new RegExp(`^${layout.registry.replace(/\./g, '\\.')}/slipway-${id}:`, 'm'));
    }
    // The edge reaches every replica directly on its node; their logs and metrics are read meanwhile (each wait on its own).
    type Figures = { replica: number; cpu_percent: number; memory_bytes: number; memory_limit_bytes: number; network_rx_bytes: number; network_tx_bytes: number; restarts: number; started_at: string };
    const [hostnames, logs, metrics] = await Promise.all([
      threeReplicasAnswer('every replica to answer through the edge'),
      // Logs of every replica, wherever it runs, read through the manager and prefixed with its number.
      eventually(async () => {
        const res = await ts?.request('GET', `/api/v1/deployments/${id}/logs?tail=50`, { token });
        return res !== undefined && [1, 2, 3].every((n) => res.text.includes(`[${n}] listening on`)) ? res.text : undefined;
      }, 60_000, "every replica's output in the logs"),
      // Metrics of every replica, the workers' read on their own engines (SLIPWAY_SWARM_NODE_ENGINES): summed, and each one's figures.
      eventually(async () => {
        const res = await ts?.request('GET', `/api/v1/deployments/${id}/metrics`, { token });
        return res?.status === 200 && Array.isArray(res.json.replicas) && res.json.replicas.length === 3 ? (res.json as Figures & { replicas: Figures[] }) : undefined;
      }, 60_000, 'metrics of the three replicas'),
    ]);
    assert.equal(hostnames.size, 3);
    assert.match(logs, /^\[1\] /m);
    assert.deepEqual(metrics.replicas.map((r) => r.replica), [1, 2, 3]);
    for (const r of metrics.replicas) assert.ok(r.memory_bytes > 0 && r.network_rx_bytes >= 0 && r.started_at !== '', JSON.stringify(r));
    const sum = (pick: (r: Figures) => number): number => metrics.replicas.reduce((total, r) => total + pick(r), 0);
    assert.equal(metrics.memory_bytes, sum((r) => r.memory_bytes));
    assert.equal(metrics.memory_limit_bytes, sum((r) => r.memory_limit_bytes));
    assert.equal(metrics.network_rx_bytes, sum((r) => r.network_rx_bytes));
    assert.equal(metrics.network_tx_bytes, sum((r) => r.network_tx_bytes));
    assert.equal(metrics.restarts, sum((r) => r.restarts));
    assert.ok(Math.abs(metrics.cpu_percent - sum((r) => r.cpu_percent)) < 1e-6);
    assert.equal(metrics.started_at, metrics.replicas.map((r) => r.started_at).sort()[0]);
    // The figures of the replicas on the workers are theirs: read on the engines where they run.
    for (const worker of layout.nodes.slice(1)) {
      const container = nodeDocker(worker, ['ps', '-q', '--filter', `label=dev.slipway.deployment=${id}`]).trim();
      assert.notEqual(container, '', `a replica on ${worker.name}`);
      const startedAt = new Date(nodeDocker(worker, ['inspect', container, '--format', '{{.State.StartedAt}}']).trim()).toISOString();
      assert.ok(metrics.replicas.some((r) => r.started_at === startedAt), `${worker.name}'s replica (started ${startedAt}) in ${JSON.stringify(metrics.replicas)}`);
    }
  });

  test("a crash-looping app (exit 3 every few seconds) shows crash_loop with its exit code and last line, secrets masked, announced once; the healthy app stays ok", async () => {
    assert.ok(ts !== undefined);
    const crashed: AppCrashedEvent[] = [];
    const unsubscribe = ts.server.appEvents.on('app.crashed', (event) => crashed.push(event));
    // Healthy for its first 7 s (it answers, so its release goes live), then it says its last words and exits 3. Swarm starts a
    // new task each time; those find the mark on the volume and crash after a second (a loop seen in seconds, not minutes).
    const archive = await busyboxScriptArchive('mkdir -p /www; echo ok > /www/index.html; httpd -p "${PORT:-8080}" -h /www; if [ -e /data/ran ]; then sleep 1; else touch /data/ran; sleep 7; fi; echo "boom: token $API_TOKEN"; exit 3');
    const app = await createArchiveApp(ts, token, archive, { volumes: [{ name: 'data', mount_path: '/data' }] });
    try {
      const secret = `tok-${process.pid}-s3cr3t`;
      const set = await ts.request('PATCH', `/api/v1/deployments/${app.id}/env`, { token, body: { vars: { API_TOKEN: secret }, secret: true } });
      assert.equal(set.status, 200, set.text);
      const deployed = await ts.request('POST', `/api/v1/deployments/${app.id}/deploy?wait=true`, { token });
      assert.equal(deployed.status, 200, deployed.text);
      const looping = await eventually(async () => {
        const dep = (await ts?.request('GET', `/api/v1/deployments/${app.id}`, { token }))?.json;
        return dep?.health?.state === 'crash_loop' ? (dep as { status: string; health: { restarts: number; last_exit_code: number; last_line: string; since: string } }) : undefined;
      }, 90_000, 'the crash loop to show under swarm');
      assert.equal(looping.status, 'running', 'the spec keeps its status values');
      assert.equal(looping.health.last_exit_code, 3);
      assert.equal(looping.health.last_line, 'boom: token [redacted]', 'the ended task\'s own last line, its secret masked');
      assert.ok(looping.health.restarts >= 3, JSON.stringify(looping.health));
      assert.ok(!Number.isNaN(Date.parse(looping.health.since)));
      const mine = crashed.filter((event) => event.deploymentId === app.id);
      assert.equal(mine.length, 1, JSON.stringify(mine));
      assert.equal(mine[0]?.exitCode, 3);
      // The healthy app beside it, running all along on the same swarm, is ok.
      const healthy = (await ts.request('GET', `/api/v1/deployments/${id}`, { token })).json;
      assert.deepEqual(healthy.health, { state: 'ok', restarts: 0, last_exit_code: null, last_line: null, since: null });
    } finally {
      unsubscribe();
      await ts.request('DELETE', `/api/v1/deployments/${app.id}`, { token });
    }
  });

  test('a redeploy under load rolls out start-first and fails no request', async () => {
    assert.ok(ts !== undefined);
    assert.equal((await upload(ts, token, id, await whoAppArchive('second\n'))).status, 200);
    const traffic = load();
    let result;
    try {
      await eventually(async () => ((await appRequest(ts?.port ?? 0, subdomain)).body === 'first\n' ? true : undefined), 30_000, 'load on the first release');
      const deployed = await ts.request('POST', `/api/v1/deployments/${id}/deploy?wait=true`, { token });
      assert.equal(deployed.status, 200, deployed.text);
      await eventually(async () => ((await appRequest(ts?.port ?? 0, subdomain)).body === 'second\n' ? true : undefined), 30_000, 'the new release to serve');
    } finally {
      result = await traffic.stop();
    }
    assert.deepEqual(result.failures, [], `${result.failures.length} of ${result.requests} requests failed`);
    assert.deepEqual([...result.bodies].sort(), ['first\n', 'second\n']);
    assert.equal(liveUpstreams().length, 3);
  });

  test('a release whose health check fails is rolled back: the build fails with the reason and the previous one keeps serving', async () => {
    assert.ok(ts !== undefined);
    const patched = await ts.request('PATCH', `/api/v1/deployments/${id}`, { token, body: { health_check_path: '/healthz' } });
    assert.equal(patched.status, 200, patched.text);
    assert.equal((await upload(ts, token, id, await whoAppArchive('third\n'))).status, 200);
    const deployed = await ts.request('POST', `/api/v1/deployments/${id}/deploy?wait=true`, { token });
    assert.notEqual(deployed.status, 200, 'the bad release is refused');
    const builds = await ts.request('GET', `/api/v1/deployments/${id}/builds`, { token });
    const failed = (builds.json.items ?? builds.json)[0] as { status: string; error: string | null };
    assert.equal(failed.status, 'failed');
    assert.match(failed.error ?? '', /a replica failed on|rolled back|healthy/);
    // The previous release serves, with all its replicas, once swarm has rolled back.
    await eventually(async () => (liveUpstreams().length === 3 ? true : undefined), 90_000, 'three replicas after the rollback');
    for (let i = 0; i < 6; i++) assert.equal((await appRequest(ts.port, subdomain)).body, 'second\n');
    const back = await ts.request('PATCH', `/api/v1/deployments/${id}`, { token, body: { health_check_path: null } });
    assert.equal(back.status, 200, back.text);
  });

  test('a deployment with volumes runs one replica pinned to one node (more are refused), on its own network (it reaches no other deployment\'s replica); with its node drained a release fails: no suitable node', async () => {
    assert.ok(ts !== undefined && layout !== undefined);
    const name = `swarm-vol-${process.pid}`;
    const refused = await ts.request('POST', '/api/v1/deployments', {
      token,
      body: { name: `${name}-x`, subdomain: `${name}-x`, source_type: 'archive', replicas: 2, volumes: [{ name: 'data', mount_path: '/data' }] },
    });
    assert.equal(refused.status, 400, refused.text);
    assert.equal(refused.json.error, 'validation_error');
    const created = await ts.request('POST', '/api/v1/deployments', {
      token,
      body: { name, subdomain: name, source_type: 'archive', volumes: [{ name: 'data', mount_path: '/data' }] },
    });
    assert.equal(created.status, 201, created.text);
    const volumeApp = created.json.id as string;
    assert.equal((await upload(ts, token, volumeApp, await whoAppArchive('volume\n'))).status, 200);
    const deployed = await ts.request('POST', `/api/v1/deployments/${volumeApp}/deploy?wait=true`, { token });
    assert.equal(deployed.status, 200, deployed.text);
    const manager = layout.nodes[0];
    assert.ok(manager !== undefined);
    const service = nodeDocker(manager, ['service', 'ls', '-q', '--filter', `label=dev.slipway.deployment=${volumeApp}`]).trim();
    const spec = JSON.parse(nodeDocker(manager, ['service', 'inspect', service, '--format', '{{json .Spec}}'])) as {
      Mode: { Replicated: { Replicas: number } };
      TaskTemplate: { Placement: { Constraints: string[] } };
    };
    assert.equal(spec.Mode.Replicated.Replicas, 1);
    const managerId = nodeDocker(manager, ['info', '--format', '{{.Swarm.NodeID}}']).trim();
    assert.deepEqual(spec.TaskTemplate.Placement.Constraints, [`node.id==${managerId}`]);

    // Tenants apart: from this deployment's task, the other deployment's replica on the same node is
    // out of reach on every network it has (its own overlay, the node's gateway bridge).
    const containerOf = (deployment: string): string => nodeDocker(manager, ['ps', '-q', '--filter', `label=dev.slipway.deployment=${deployment}`]).trim().split('\n')[0] ?? '';
    const other = containerOf(id);
    const mine = containerOf(volumeApp);
    assert.ok(other !== '' && mine !== '');
    const addresses = nodeDocker(manager, ['inspect', other, '--format', '{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}']).trim().split(' ');
    const gateway = [...nodeDocker(manager, ['exec', other, 'ip', '-4', '-o', 'addr']).matchAll(/inet (172\.\d+\.\d+\.\d+)\//g)].map((m) => m[1] ?? '');
    const reach = (from: string, address: string): Promise<boolean> => nodeDockerSucceeds(manager, ['exec', from, 'nc', '-w', '2', address, '8080', '-e', '/bin/true']);
    const targets = [...new Set([...addresses, ...gateway])].filter((a) => a !== '');
    assert.ok(targets.length >= 2, targets.join(' '));
    for (const address of targets) assert.equal(await reach(other, address), true, `the replica reaches itself at ${address}`);
    // The probes that must fail at once (each waits out its 2 s).
    const reached = await Promise.all(targets.map((address) => reach(mine, address)));
    targets.forEach((address, i) => assert.equal(reached[i], false, `another deployment reaches the replica at ${address}`));

    // Nor at its node's published port, on this node or another (the node guard, one task per node,
    // drops containers' new connections to the nodes' ephemeral ports) while the edge reaches each.
    await eventually(async () => {
      const tasks = nodeDocker(manager, ['service', 'ps', '-q', 'slipway-guard', '--filter', 'desired-state=running']).trim().split('\n').filter((t) => t !== '');
      if (tasks.length !== 3) return undefined;
      // Node ids, not names: the test cluster's nodes share the host's hostname.
      const running = nodeDocker(manager, ['inspect', ...tasks, '--format', '{{.NodeID}} {{.Status.State}}']).trim().split('\n');
      return running.every((line) => line.endsWith(' running')) && new Set(running.map((line) => line.split(' ')[0])).size === 3 ? true : undefined;
    }, 90_000, 'the node guard to run one task on each node');
    for (const node of layout.nodes) {
      await eventually(async () => (execFileSync('nsenter', [`--net=/run/netns/${node.netns}`, '--', 'iptables', '-S', 'DOCKER-USER'], { encoding: 'utf8' }).includes('-j SLWG-') ? true : undefined), 60_000, `the guard's rules on ${node.name}`);
    }
    const published = liveUpstreams();
    // A replica on this task's node and one on another (swarm spreads the three; a rollback may pair two).
    assert.ok(published.some((u) => u.host === manager.address) && published.some((u) => u.host !== manager.address), JSON.stringify(published));
    const dial = (address: string, port: number): Promise<boolean> => nodeDockerSucceeds(manager, ['exec', mine, '/.slipway/busybox', 'nc', '-w', '3', address, String(port), '-e', '/.slipway/busybox', 'true']);
    // The task reaches the nodes themselves (swarm's own port, 2377): only the published ports, and the registry's, are closed (those dials at once: each waits out its 3 s).
    assert.equal(await dial(manager.address, 2377), true, 'the task reaches its node');
    const [registry, ...replicas] = await Promise.all([dial(manager.address, Number(layout.registry.split(':')[1])), ...published.map((u) => dial(u.host, u.port))]);
    assert.equal(registry, false, 'the task reaches the registry every tenant\'s image is in');
    published.forEach((upstream, i) => assert.equal(replicas[i], false, `another deployment reaches the replica at ${upstream.host}:${upstream.port}`));
    const served = await threeReplicasAnswer('every replica to answer through the edge with the guard in place');
    assert.equal(served.size, 3);

    // Its node drained, a new release of it cannot be placed anywhere: the build fails with swarm's reason.
    const drained = await ts.request('POST', `/api/v1/nodes/${managerId}/drain`, { token: ts.adminToken });
    assert.equal(drained.status, 200, drained.text);
    try {
      const unplaceable = await ts.request('POST', `/api/v1/deployments/${volumeApp}/deploy?wait=true`, { token });
      assert.notEqual(unplaceable.status, 200);
      assert.match(unplaceable.json.message as string, /could not be placed: no suitable node/);
    } finally {
      const active = await ts.request('POST', `/api/v1/nodes/${managerId}/activate`, { token: ts.adminToken });
      assert.equal(active.status, 200, active.text);
    }
    // Rolled back: the service runs the live release's spec again (not the one that could not be placed).
    const live = liveReleaseOf(volumeApp) as { release: string };
    const release = nodeDocker(manager, ['service', 'inspect', service, '--format', '{{index .Spec.Labels "dev.slipway.release"}}']).trim();
    assert.equal(`${service}/${release}`.endsWith(live.release.split('/')[1] ?? '?'), true, `${release} vs ${live.release}`);
    await eventually(async () => (nodeDocker(manager, ['service', 'inspect', service, '--format', '{{.UpdateStatus.State}}']).trim() === 'rollback_completed' ? true : undefined), 60_000, 'the rollback to complete');

    const removed = await ts.request('DELETE', `/api/v1/deployments/${volumeApp}`, { token });
    assert.equal(removed.status, 204, removed.text);
    await eventually(async () => (nodeDocker(manager, ['service', 'ls', '-q', '--filter', `label=dev.slipway.deployment=${volumeApp}`]).trim() === '' ? true : undefined), 60_000, 'the service to be removed with its deployment');
  });

  test("the node guard: a new image replaces every node's task start-first (its chains in, the old ones out); turned off, every node's rules go; on again, they are back", async () => {
    assert.ok(ts !== undefined && layout !== undefined);
    const manager = layout.nodes[0];
    assert.ok(manager !== undefined);
    // Each task's chains, per node (the server also looks at the guard every minute: only what holds whoever updated it last is asserted).
    const chains = (): string[][] => (layout?.nodes ?? []).map((node) =>
      execFileSync('nsenter', [`--net=/run/netns/${node.netns}`, '--', 'iptables', '-S'], { encoding: 'utf8' }).split('\n').flatMap((line) => /^-N (SLWG-[0-9a-f]+)$/.exec(line)?.[1] ?? []));
    const first = chains();
    assert.ok(first.every((c) => c.length === 1), JSON.stringify(first));
    const old = new Set(first.flat());
    assert.equal(old.size, 3, 'a chain of its own for each task');
    const files = await guardImageFiles('/bin/busybox');
    const options = { docker: createDockerClient(`unix://${manager.socket}`), registry: { address: layout.registry }, busybox: '/bin/busybox', enabled: true, log: (): void => undefined };
    const signal = AbortSignal.timeout(180_000);
    assert.equal(await reconcileNodeGuard(options, files, await contentHash(files), signal), 'unchanged', 'the running guard is as wanted');
    // Another image (the same files under another tag): an update; each node keeps one task's rules, the new one's.
    assert.equal(await reconcileNodeGuard(options, files, '00000000feedface', signal), 'updated');
    await eventually(async () => (chains().every((c) => c.length === 1 && !old.has(c[0] ?? '')) ? true : undefined), 90_000, "the new tasks' chains alone on every node");
    for (let i = 0; i < 6; i++) assert.equal((await appRequest(ts.port, subdomain)).status, 200);
    // Off: each task removes its chains as it stops.
    const updated = new Set(chains().flat());
    assert.equal(await reconcileNodeGuard({ ...options, enabled: false }, files, '', signal), 'removed');
    await eventually(async () => (chains().every((c) => c.every((name) => !updated.has(name))) ? true : undefined), 60_000, 'every rule removed as its task stops');
    assert.match(await reconcileNodeGuard(options, files, await contentHash(files), signal), /^(created|unchanged)$/);
    await eventually(async () => (chains().every((c) => c.length === 1) ? true : undefined), 90_000, 'the guard back on every node');
  });

  test("a drained node's replicas leave the edge first and move to the other nodes, under load with no failed request; activate takes it back", async () => {
    assert.ok(ts !== undefined && layout !== undefined);
    const worker = (await nodes()).find((n) => n.address === layout?.nodes[2]?.address);
    assert.ok(worker !== undefined);
    const traffic = load();
    let result;
    let upstreams;
    try {
      await eventually(async () => ((await appRequest(ts?.port ?? 0, subdomain)).status === 200 ? true : undefined), 30_000, 'load before the drain');
      const drained = await ts.request('POST', `/api/v1/nodes/${worker.id}/drain`, { token: ts.adminToken });
      assert.equal(drained.status, 200, drained.text);
      assert.equal(drained.json.availability, 'drain');
      // Left the edge before swarm stopped it: at once, whatever the replacement's progress.
      assert.ok(liveUpstreams().every((u) => u.host !== worker.address), 'the drained node is out of the route when the drain answers');
      upstreams = await eventually(async () => {
        const now = liveUpstreams();
        return now.length === 3 && now.every((u) => u.host !== worker.address) ? now : undefined;
      }, 90_000, "the drained node's replica to be replaced elsewhere");
    } finally {
      result = await traffic.stop();
    }
    assert.deepEqual(result.failures, [], `${result.failures.length} of ${result.requests} requests failed during the drain`);
    assert.equal(upstreams.length, 3);
    assert.equal((await nodes()).find((n) => n.id === worker.id)?.replicas, 0);
    for (let i = 0; i < 6; i++) assert.equal((await appRequest(ts.port, subdomain)).status, 200);
    const active = await ts.request('POST', `/api/v1/nodes/${worker.id}/activate`, { token: ts.adminToken });
    assert.equal(active.status, 200, active.text);
    assert.equal(active.json.availability, 'active');
  });

  test("a lost node's replicas leave the edge and are replaced on the other nodes", async () => {
    assert.ok(ts !== undefined && layout !== undefined);
    // The worker that runs replicas now (the drained one came back empty).
    const listed = await nodes();
    const lost = listed.find((n) => n.replicas > 0 && n.address !== layout?.nodes[0]?.address);
    assert.ok(lost !== undefined, JSON.stringify(listed));
    const node = layout.nodes.find((n) => n.address === lost.address);
    assert.ok(node !== undefined);
    // The node drops off the test bridge: the manager stops hearing from it.
    execFileSync('ip', ['-n', node.netns, 'link', 'set', 'eth0', 'down']);
    try {
      const upstreams = await eventually(async () => {
        const now = liveUpstreams();
        return now.length === 3 && now.every((u) => u.host !== lost.address) ? now : undefined;
      }, 120_000, "the lost node's replicas to be replaced elsewhere");
      assert.equal(upstreams.length, 3);
      assert.notEqual((await nodes()).find((n) => n.id === lost.id)?.state, 'ready');
      for (let i = 0; i < 6; i++) assert.equal((await appRequest(ts.port, subdomain)).status, 200);
    } finally {
      execFileSync('ip', ['-n', node.netns, 'link', 'set', 'eth0', 'up']);
    }
  });
});
