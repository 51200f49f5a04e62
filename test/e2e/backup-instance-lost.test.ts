// End to end (decisions §20, §15): a server killed (-9) mid-backup; at its next start the backup is failed ("instance lost") and taken again, the schedule missed while it was down is taken, and retention deletes the oldest verified backup's object.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import Database from 'better-sqlite3';
import { eventually } from '../helpers/apps.js';
import { STAND_IN_IMAGES, databaseContainer, runIn } from '../helpers/databases.js';
import { S3_ACCESS_KEY, S3_SECRET_KEY, startS3, type TestS3 } from '../helpers/s3.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, loginAs, removeEngineObjects, request, spawnServerProcess, testEnv, type ServerProcess } from '../helpers/server.js';

/** A TCP relay to `target` that can hold back everything clients send (a destination that stops answering). */
async function stallableRelay(target: URL): Promise<{ endpoint: string; stall(on: boolean): void; close(): Promise<void> }> {
  let stalled = false;
  const sockets = new Set<net.Socket>();
  const held: Array<() => void> = [];
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(target.port), target.hostname);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('error', () => undefined);
      s.on('close', () => sockets.delete(s));
    }
    client.on('data', (chunk) => {
      if (!stalled) return void upstream.write(chunk);
      client.pause();
      held.push(() => {
        upstream.write(chunk);
        client.resume();
      });
    });
    upstream.pipe(client);
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    endpoint: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    stall(on) {
      stalled = on;
      if (!on) for (const release of held.splice(0)) release();
    },
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

describe('a backup on a killed instance', () => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'slipway-backup-lost-'));
  let s3: TestS3;
  let relay: Awaited<ReturnType<typeof stallableRelay>>;
  let server: ServerProcess | undefined;
  let token: string;
  let dbId: string;
  let destinationId: string;
  const api = (method: string, urlPath: string, body?: object) => request(server!.url, method, urlPath, { token, ...(body === undefined ? {} : { body }) });
  const start = async () => {
    server = await spawnServerProcess(testEnv(dataDir, { ...STAND_IN_IMAGES, SLIPWAY_ALLOW_PRIVATE_TARGETS: 'true' }));
    token = await loginAs(server.url, ADMIN_EMAIL, ADMIN_PASSWORD);
  };
  /** kill -9 of the supervisor and of its server process: nothing shut down cleanly. */
  const kill = async () => {
    const holder = JSON.parse(fs.readFileSync(path.join(dataDir, 'server.lock.holder'), 'utf8')) as { pid: number };
    await server?.kill('SIGKILL');
    try {
      process.kill(holder.pid, 'SIGKILL');
    } catch {
      // already gone with its supervisor
    }
    server = undefined;
  };
  const waitEnded = (id: string) =>
    eventually(async () => {
      const res = await api('GET', `/api/v1/databases/${dbId}/backups/${id}`);
      return res.json?.status === 'running' || res.json?.status === 'succeeded' ? undefined : res.json;
    }, 120_000, `backup ${id} to end`);

  before(async () => {
    s3 = await startS3();
    relay = await stallableRelay(new URL(s3.endpoint));
    await start();
    destinationId = (
      await api('POST', '/api/v1/backup-destinations', { name: 'offsite', type: 's3', endpoint: relay.endpoint, region: 'us-east-1', bucket: s3.bucket, access_key_id: S3_ACCESS_KEY, secret_access_key: S3_SECRET_KEY, force_path_style: true })
    ).json.id;
    dbId = (await api('POST', '/api/v1/databases', { name: 'cache', engine: 'redis' })).json.id;
    await eventually(async () => ((await api('GET', `/api/v1/databases/${dbId}`)).json.status === 'running' ? true : undefined), 120_000, 'the database to run');
    const password = (await api('GET', `/api/v1/databases/${dbId}/credentials`)).json.password as string;
    await runIn((await databaseContainer(dbId))!.Id, ['redis-cli', '--no-auth-warning', 'mset', 'a', '1', 'b', '2'], { REDISCLI_AUTH: password });
  });
  after(async () => {
    relay?.stall(false);
    if (server !== undefined && dbId !== undefined) await api('DELETE', `/api/v1/databases/${dbId}?force=true`).catch(() => undefined);
    await server?.kill('SIGTERM');
    await removeEngineObjects(dataDir).catch(() => undefined);
    fs.rmSync(dataDir, { recursive: true, force: true });
    await relay?.close();
    await s3?.close();
  });

  test('killed mid-backup: failed "instance lost" and taken again at the next start; the schedule missed meanwhile runs; keep deletes the oldest verified object', async () => {
    // A schedule that is not due now (1 January), keeping 2 verified backups; one verified backup to start with.
    assert.equal((await api('PATCH', `/api/v1/databases/${dbId}`, { backup: { schedule: '0 0 1 1 *', destination_id: destinationId, keep: 2 } })).status, 200);
    const first = await waitEnded((await api('POST', `/api/v1/databases/${dbId}/backups`, {})).json.id);
    assert.equal(first.status, 'verified', first.error);
    assert.equal((await s3.objectFiles()).length, 1);

    // The destination stops answering, a backup starts (running), and the instance is killed.
    relay.stall(true);
    const cut = await api('POST', `/api/v1/databases/${dbId}/backups`, {});
    assert.equal(cut.status, 202, cut.text);
    assert.equal((await api('GET', `/api/v1/databases/${dbId}/backups/${cut.json.id}`)).json.status, 'running');
    await kill();

    // While no instance runs, the schedule's due time (1 January) passes: as if it was set a year before.
    const sqlite = new Database(path.join(dataDir, 'slipway.db'));
    sqlite.prepare('update backup_schedules set updated_at = ? where database_id = ?').run(`${new Date().getUTCFullYear() - 1}-06-01T00:00:00.000Z`, dbId);
    sqlite.close();
    relay.stall(false);
    await start();

    const settled = await eventually(async () => {
      const items = (await api('GET', `/api/v1/databases/${dbId}/backups`)).json as Array<{ id: string; status: string; trigger: string; error: string | null }>;
      const others = items.filter((b) => b.id !== first.id && b.id !== cut.json.id);
      return others.length === 2 && others.every((b) => b.status === 'verified') && !items.some((b) => b.id === first.id) ? items : undefined;
    }, 150_000, 'the lost backup taken again, the missed schedule taken, and the oldest verified backup pruned');
    const lost = settled.find((b) => b.id === cut.json.id);
    assert.equal(lost?.status, 'failed');
    assert.match(lost?.error ?? '', /^instance lost: /);
    assert.deepEqual(settled.filter((b) => b.id !== cut.json.id).map((b) => b.trigger).sort(), ['manual', 'schedule'], 'the manual backup retaken and the missed scheduled one');
    assert.equal((await api('GET', `/api/v1/databases/${dbId}/backups/${first.id}`)).status, 404, 'the oldest verified backup is deleted (keep 2)');
    const objects = await s3.objectFiles();
    assert.equal(objects.length, 2, objects.join(', '));
    assert.ok(!objects.some((o) => o.includes(first.id)), "the pruned backup's object is gone from the destination");
  });
});
