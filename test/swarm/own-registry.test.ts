// Swarm without SLIPWAY_REGISTRY on the real test cluster (decisions §16): Slipway, in the manager's namespace, runs its own registry on the manager's address; workers pull from it and the edge serves their replicas.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { after, before, describe, test } from 'node:test';
import { appRequest, eventually } from '../helpers/apps.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, loginAs, request, spawnServerProcess, testEnv, type ServerProcess } from '../helpers/server.js';
import { busyboxOnManager, clusterScript, nodeDocker, whoAppArchive, type ClusterLayout, type ClusterScript } from '../helpers/swarm-cluster.js';

/** Pids of processes whose command line names `needle` (read from /proc). */
function processesNaming(needle: string): number[] {
  const found: number[] = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const cmdline = (() => {
      try {
        return fs.readFileSync(`/proc/${entry}/cmdline`, 'utf8');
      } catch {
        return '';
      }
    })();
    if (cmdline.includes(needle)) found.push(Number(entry));
  }
  return found;
}

describe("swarm with Slipway's own registry", () => {
  let cluster: ClusterScript;
  let layout: ClusterLayout | undefined;
  let server: ServerProcess | undefined;
  let dataDir = '';

  before(async () => {
    cluster = await clusterScript();
    layout = await cluster.up(process.pid);
    const manager = layout.nodes[0];
    assert.ok(manager !== undefined);
    // Under the cluster's directory: removed by `down`, and a registry a crash left behind is killed with it.
    dataDir = path.join(layout.dir, 'slipway');
    fs.mkdirSync(dataDir, { mode: 0o700 });
    // The busybox base apps build FROM, copied to the manager (first: the server's start has a deadline).
    await busyboxOnManager(layout);
    // Slipway runs on the manager, beside its engine: in its namespace, listening on its address.
    server = await spawnServerProcess(
      testEnv(dataDir, {
        SLIPWAY_HOST: manager.address,
        DOCKER_HOST: `unix://${manager.socket}`,
        SLIPWAY_RUNTIME: 'swarm',
        // No SLIPWAY_REGISTRY: its own, on a port the cluster's nodes trust (5000 is the cluster's registry).
        SLIPWAY_REGISTRY_PORT: layout.ownRegistry.split(':')[1] ?? '',
        SLIPWAY_DATA_PLANE: 'node',
        SLIPWAY_BUILD_NETWORK: 'none',
        SLIPWAY_STARTUP_TIMEOUT_SECONDS: '15',
      }),
      [],
      { netns: manager.netns },
    );
  });
  after(async () => {
    await server?.kill();
    if (layout !== undefined) await cluster.down(layout);
  });

  test('its registry runs on the manager with a config of its own; 2 replicas pulled from it by workers are served through the edge; it stops with the server', async () => {
    assert.ok(server !== undefined && layout !== undefined);
    const manager = layout.nodes[0];
    assert.ok(manager !== undefined);
    const base = `http://${manager.address}:${server.port}`;
    const token = await loginAs(base, ADMIN_EMAIL, ADMIN_PASSWORD);

    // Debian's registry, started by Slipway with the config it wrote (no login, on the manager's address).
    const config = path.join(dataDir, 'registry.yml');
    const registries = processesNaming(config);
    assert.equal(registries.length, 1, server.output());
    assert.match(fs.readFileSync(`/proc/${registries[0]}/cmdline`, 'utf8'), /^\/usr\/bin\/docker-registry\0serve\0/);
    assert.equal(fs.statSync(config).mode & 0o777, 0o600);
    assert.match(fs.readFileSync(config, 'utf8'), new RegExp(`addr: "${layout.ownRegistry.replace(/\./g, '\\.')}"`));
    const v2 = await fetch(`http://${layout.ownRegistry}/v2/`);
    assert.equal(v2.status, 200, 'no login asked');

    const subdomain = `own-registry-${process.pid}`;
    const created = await request(base, 'POST', '/api/v1/deployments', { token, body: { name: subdomain, subdomain, source_type: 'archive', replicas: 2 } });
    assert.equal(created.status, 201, created.text);
    const id = created.json.id as string;
    const form = new FormData();
    form.append('archive', new Blob([await whoAppArchive('own\n')], { type: 'application/gzip' }), 'source.tar.gz');
    assert.equal((await request(base, 'POST', `/api/v1/deployments/${id}/upload`, { token, raw: form })).status, 200);
    const deployed = await request(base, 'POST', `/api/v1/deployments/${id}/deploy?wait=true`, { token });
    assert.equal(deployed.status, 200, `${deployed.text}\n${server.output()}`);

    // The image went to Slipway's registry.
    const catalog = (await (await fetch(`http://${layout.ownRegistry}/v2/_catalog`)).json()) as { repositories: string[] };
    assert.ok(catalog.repositories.includes(`slipway-${id}`), JSON.stringify(catalog));
    // Two replicas on two nodes; every worker that runs one pulled the image from Slipway's registry (it was built on the manager).
    const db = new Database(path.join(dataDir, 'slipway.db'), { readonly: true });
    let upstreams: Array<{ host: string; port: number }>;
    try {
      const row = db.prepare('select b.upstreams as upstreams from deployments d join builds b on b.id = d.live_build_id where d.id = ?').get(id) as { upstreams: string | null } | undefined;
      upstreams = JSON.parse(row?.upstreams ?? '[]') as Array<{ host: string; port: number }>;
    } finally {
      db.close();
    }
    assert.equal(upstreams.length, 2);
    assert.equal(new Set(upstreams.map((u) => u.host)).size, 2, 'spread over two nodes');
    const workers = layout.nodes.slice(1).filter((node) => upstreams.some((u) => u.host === node.address));
    assert.ok(workers.length >= 1, 'a worker runs a replica');
    for (const worker of workers) {
      const images = nodeDocker(worker, ['image', 'ls', '--format', '{{.Repository}}:{{.Tag}}']);
      assert.match(images, new RegExp(`^${layout.ownRegistry.replace(/\./g, '\\.')}/slipway-${id}:`, 'm'));
    }
    // The edge (on the manager's address) reaches both replicas.
    const hostnames = await eventually(async () => {
      const seen = new Set<string>();
      for (let i = 0; i < 10; i++) {
        const res = await appRequest(server?.port ?? 0, subdomain, { path: '/who.txt', address: manager.address });
        assert.equal(res.status, 200, res.body);
        seen.add(res.body.trim());
      }
      return seen.size === 2 ? seen : undefined;
    }, 60_000, 'both replicas to answer through the edge');
    assert.equal(hostnames.size, 2);
    assert.equal((await appRequest(server.port, subdomain, { address: manager.address })).body, 'own\n');

    const removed = await request(base, 'DELETE', `/api/v1/deployments/${id}`, { token });
    assert.equal(removed.status, 204, removed.text);
    await eventually(async () => (nodeDocker(manager, ['service', 'ls', '-q', '--filter', `label=dev.slipway.deployment=${id}`]).trim() === '' ? true : undefined), 60_000, 'the service to go');

    // A clean stop ends the registry with the server.
    await server.kill();
    await eventually(async () => (processesNaming(config).length === 0 ? true : undefined), 30_000, 'the registry to stop with the server');
  });
});
