// API tests: the deployment list is served from a cache of pages by list version, yet every write (API, lifecycle, another process) is on the very next list call, and no user sees another's page.
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { openDatabase, type Db } from '../../src/db/database.js';
import { databaseDeploymentCatalog } from '../../src/db/deployment-catalog.js';
import { databaseDeploymentStore } from '../../src/db/deployment-store.js';
import { busyboxArchive, createArchiveApp, eventually, upload, uniqueSubdomain } from '../helpers/apps.js';
import { startTestServer, type HttpResult, type TestServer } from '../helpers/server.js';

interface Listed {
  id: string;
  name: string;
  status: string;
  updated_at: string;
  live_build_id: string | null;
}

describe('the deployment list after writes', () => {
  let s: TestServer;
  /** A second connection to the server's database: what another process or instance would write through. */
  let other: Db;
  before(async () => {
    s = await startTestServer();
    other = await openDatabase({ file: path.join(s.dataDir, 'slipway.db'), url: s.config.databaseUrl });
  });
  after(async () => {
    await other.destroy();
    await s.close();
  });

  const list = async (token: string, query = ''): Promise<{ res: HttpResult; items: Listed[] }> => {
    const res = await s.request('GET', `/api/v1/deployments${query}`, { token });
    assert.equal(res.status, 200, res.text);
    return { res, items: res.json as Listed[] };
  };
  /** Lists twice (the second answer comes from the cache when nothing changed) and returns the items. */
  const primed = async (token: string, query = ''): Promise<Listed[]> => {
    const first = await list(token, query);
    const second = await list(token, query);
    assert.equal(second.res.text, first.res.text, 'nothing changed: the same answer');
    assert.equal(second.res.headers.get('link'), first.res.headers.get('link'), 'with the same next link');
    return second.items;
  };
  const create = async (token: string, label: string): Promise<string> => {
    const subdomain = uniqueSubdomain(label);
    const res = await s.request('POST', '/api/v1/deployments', { token, body: { name: subdomain, subdomain, source_type: 'archive' } });
    assert.equal(res.status, 201, res.text);
    return res.json.id as string;
  };
  const find = (items: Listed[], id: string): Listed | undefined => items.find((d) => d.id === id);

  test('create, rename, upload and delete are on the very next list call (every page size)', async () => {
    const user = await s.newUser('lc-writes');
    for (const query of ['', '?limit=1']) {
      assert.deepEqual(await primed(user.token, query), []);
    }
    const id = await create(user.token, 'lc');
    for (const query of ['', '?limit=1']) assert.equal((await list(user.token, query)).items[0]?.id, id, `created: list${query}`);

    await primed(user.token);
    const renamed = await s.request('PATCH', `/api/v1/deployments/${id}`, { token: user.apiKey, body: { name: 'renamed' } });
    assert.equal(renamed.status, 200, renamed.text);
    assert.equal(find((await list(user.token)).items, id)?.name, 'renamed', 'rename (through an API key, listed with a session)');

    const before = find(await primed(user.apiKey), id);
    await new Promise((resolve) => setTimeout(resolve, 5)); // updated_at has millisecond resolution
    const archive = await busyboxArchive({ body: 'list cache\n' });
    assert.equal((await upload(s, user.token, id, archive.archive)).status, 200);
    assert.notEqual(find((await list(user.apiKey)).items, id)?.updated_at, before?.updated_at, 'an upload changes updated_at');

    await primed(user.token, '?limit=1');
    const second = await create(user.token, 'lc');
    const page = await list(user.token, '?limit=1');
    assert.deepEqual(page.items.map((d) => d.id), [second], 'the first page of one shows the newest');
    assert.match(page.res.headers.get('link') ?? '', /rel="next"/, 'and now has a next page');

    await primed(user.token);
    for (const gone of [id, second]) assert.equal((await s.request('DELETE', `/api/v1/deployments/${gone}`, { token: user.token })).status, 204);
    assert.deepEqual((await list(user.token)).items, [], 'deleted: gone at once');
    const empty = await list(user.token, '?limit=1');
    assert.deepEqual(empty.items, []);
    assert.equal(empty.res.headers.get('link'), null);
  });

  test("the lifecycle's status changes are on the next list call: building, then running with its live build, then stopped", async () => {
    const user = await s.newUser('lc-life');
    const v1 = await busyboxArchive({ body: 'lifecycle\n' });
    const { id } = await createArchiveApp(s, user.token, v1.archive);
    assert.equal(find(await primed(user.token), id)?.status, 'pending');

    const trigger = await s.request('POST', `/api/v1/deployments/${id}/deploy`, { token: user.token });
    assert.equal(trigger.status, 202, trigger.text);
    const listed = find((await list(user.token)).items, id);
    assert.ok(listed?.status === 'building' || listed?.status === 'running', `after the trigger: ${listed?.status}`);

    // The build ends in the background (the lifecycle writes the status); the single-item route
    // reads the row, and the list call right after it must agree.
    const running = await eventually(async () => {
      const one = await s.request('GET', `/api/v1/deployments/${id}`, { token: user.token });
      return one.json.status === 'running' || one.json.status === 'failed' ? one.json : undefined;
    }, 120_000, 'the build to end');
    assert.equal(running.status, 'running', 'the build succeeded (see its log if not)');
    const afterBuild = find((await list(user.token)).items, id);
    assert.equal(afterBuild?.status, 'running');
    assert.equal(afterBuild?.live_build_id, running.live_build_id);
    assert.ok(afterBuild?.live_build_id);

    await primed(user.token);
    assert.equal((await s.request('POST', `/api/v1/deployments/${id}/stop`, { token: user.token })).status, 200);
    assert.equal(find((await list(user.token)).items, id)?.status, 'stopped');
    assert.equal((await s.request('DELETE', `/api/v1/deployments/${id}`, { token: user.token })).status, 204);
  });

  test('a write by another process sharing the database is on the next list call', async () => {
    const user = await s.newUser('lc-other');
    const id = await create(user.token, 'lc');
    assert.equal(find(await primed(user.token), id)?.status, 'pending');

    await databaseDeploymentStore(other, 'dddddddd-0000-4000-8000-000000000000').setStatus(id, 'failed');
    assert.equal(find((await list(user.token)).items, id)?.status, 'failed', 'a status written elsewhere');

    await primed(user.token);
    await databaseDeploymentCatalog(other).update(id, { name: 'renamed elsewhere' });
    assert.equal(find((await list(user.token)).items, id)?.name, 'renamed elsewhere', 'a rename written elsewhere');

    await primed(user.token);
    await databaseDeploymentStore(other, 'dddddddd-0000-4000-8000-000000000000').remove(id);
    assert.equal(find((await list(user.token)).items, id), undefined, 'a delete made elsewhere');
  });

  test('an ETag names the page: If-None-Match gets 304 while it is unchanged, 200 with a new tag after a write, never for another user', async () => {
    const alice = await s.newUser('lc-tag-a');
    const bob = await s.newUser('lc-tag-b');
    const first = (await list(alice.token)).res;
    const tag = first.headers.get('etag');
    assert.ok(tag !== null && /^"[A-Za-z0-9_-]+"$/.test(tag), `ETag: ${tag}`);
    assert.equal(first.headers.get('cache-control'), 'private, no-cache');
    assert.notEqual((await list(bob.token)).res.headers.get('etag'), tag, 'two empty lists of two users have two tags');

    for (const header of [tag, `W/${tag}`, `"other", ${tag}`, '*']) {
      const again = await s.request('GET', '/api/v1/deployments', { token: alice.apiKey, headers: { 'if-none-match': header } });
      assert.equal(again.status, 304, header);
      assert.equal(again.text, '');
      assert.equal(again.headers.get('etag'), tag);
    }
    const bobs = await s.request('GET', '/api/v1/deployments', { token: bob.token, headers: { 'if-none-match': tag } });
    assert.equal(bobs.status, 200, "Alice's tag is not Bob's page");

    const id = await create(alice.token, 'lct');
    const changed = await s.request('GET', '/api/v1/deployments', { token: alice.token, headers: { 'if-none-match': tag } });
    assert.equal(changed.status, 200, 'after a write the old tag no longer matches');
    assert.deepEqual(changed.json.map((d: Listed) => d.id), [id]);
    assert.notEqual(changed.headers.get('etag'), tag);
  });

  test("users never see each other's pages, whatever they asked for and in whatever order", async () => {
    const alice = await s.newUser('lc-alice');
    const bob = await s.newUser('lc-bob');
    const a1 = await create(alice.token, 'lca');
    const a2 = await create(alice.token, 'lca');
    const b1 = await create(bob.token, 'lcb');
    for (const query of ['', '?limit=1', '?limit=100&x=1']) {
      for (const [user, mine, theirs] of [
        [alice, [a2, a1], [b1]],
        [bob, [b1], [a2, a1]],
        [alice, [a2, a1], [b1]],
      ] as const) {
        for (const token of [user.token, user.apiKey]) {
          const ids = (await list(token, query)).items.map((d) => d.id);
          assert.deepEqual(ids, query === '?limit=1' ? mine.slice(0, 1) : [...mine], `${user.email} ${query}`);
          for (const id of theirs) assert.ok(!ids.includes(id));
        }
      }
    }
    // Alice's write changes Alice's list only.
    const a3 = await create(alice.token, 'lca');
    assert.deepEqual((await list(bob.token)).items.map((d) => d.id), [b1]);
    assert.deepEqual((await list(alice.token)).items.map((d) => d.id), [a3, a2, a1]);
    // Alice's cursor does not open Bob's list, even for a page Alice has cached.
    const link = (await list(alice.token, '?limit=1')).res.headers.get('link') ?? '';
    const next = /^<([^>]+)>/.exec(link)?.[1];
    assert.ok(next !== undefined, link);
    assert.equal((await s.request('GET', next, { token: alice.token })).status, 200);
    assert.equal((await s.request('GET', next, { token: bob.token })).status, 400);
  });
});
