// End-to-end: a database survives the server's kill -9 mid-creation (finished at the next start, never lost track of), a clean restart, and its container stopped behind Slipway's back; its data stays.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, describe, test } from 'node:test';
import { eventually, tempDir } from '../helpers/apps.js';
import { STAND_IN_IMAGES, databaseContainer, docker, psql, waitForStatus } from '../helpers/databases.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, loginAs, removeEngineObjects, request, spawnServerProcess, testEnv, type ServerProcess } from '../helpers/server.js';

describe('databases across server restarts', () => {
  const dataDir = tempDir('db-restart');
  let server: ServerProcess | undefined;
  after(async () => {
    await server?.kill('SIGKILL');
    await removeEngineObjects(dataDir);
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  const env = testEnv(dataDir, STAND_IN_IMAGES);
  const start = async (): Promise<{ url: string; token: string }> => {
    server = await spawnServerProcess(env);
    return { url: server.url, token: await loginAs(server.url, ADMIN_EMAIL, ADMIN_PASSWORD) };
  };

  test('killed mid-creation, restarted, stopped behind its back: it ends running with its data', async () => {
    let { url, token } = await start();
    const created = await request(url, 'POST', '/api/v1/databases', { token, body: { name: 'durable', engine: 'postgres' } });
    assert.equal(created.status, 201, created.text);
    const id = created.json.id as string;
    // kill -9 while it is being created: the record says `creating`, the engine may hold a half-started container.
    await server!.kill('SIGKILL');

    ({ url, token } = await start());
    const finished = await waitForStatus({ request: (m, p, o) => request(url, m, p, o) }, token, id);
    assert.equal(finished.status, 'running', `finished at the next start: ${finished.error}`);
    const creds = (await request(url, 'GET', `/api/v1/databases/${id}/credentials`, { token })).json;
    const first = await databaseContainer(id);
    await psql(first!.Id, creds, "create table t (v text); insert into t values ('survives')");

    // A clean restart leaves the database running as it was.
    await server!.kill('SIGTERM');
    ({ url, token } = await start());
    const again = (await request(url, 'GET', `/api/v1/databases/${id}`, { token })).json;
    assert.equal(again.status, 'running');
    assert.equal(await psql((await databaseContainer(id))!.Id, creds, 'select v from t'), 'survives\n');

    // Its container stopped while no server ran: the next start brings it back from its volume.
    await server!.kill('SIGTERM');
    await docker.getContainer(first!.Id).stop({ t: 5 });
    ({ url, token } = await start());
    const back = await waitForStatus({ request: (m, p, o) => request(url, m, p, o) }, token, id);
    assert.equal(back.status, 'running');
    // Started again in the background: it answers with its data within the start-up time.
    await eventually(async () => {
      const container = await databaseContainer(id);
      if (container?.State.Running !== true) return undefined;
      return (await psql(container.Id, creds, 'select v from t').catch(() => '')) === 'survives\n' ? true : undefined;
    }, 180_000, 'the database back with its data');
    assert.notEqual((await databaseContainer(id))!.Id, first!.Id, 'a new container on the same volume');
  });
});
