// API tests: lists a page at a time (decisions §14) — limit, opaque cursors, the `next` link, stability and isolation.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { assertError } from '../helpers/api-assert.js';
import { upload, uniqueSubdomain } from '../helpers/apps.js';
import { startTestServer, type HttpResult, type TestServer } from '../helpers/server.js';
import { makeTarGz } from '../helpers/tar-fixtures.js';

const NEXT_LINK = /^<(\/api\/v1\/[^>]+)>; rel="next"$/;

describe('paged lists', () => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer();
  });
  after(async () => {
    await s.close();
  });

  /** The `next` link of an answer (path and query), or undefined. */
  const nextOf = (res: HttpResult): string | undefined => {
    const link = res.headers.get('link');
    if (link === null) return undefined;
    const match = NEXT_LINK.exec(link);
    assert.ok(match !== null, `Link header: ${link}`);
    return match[1];
  };

  /** Every page of a list from `first`, following `next` links: the pages' ids. */
  const walk = async (token: string, first: string): Promise<string[][]> => {
    const pages: string[][] = [];
    for (let url: string | undefined = first; url !== undefined; ) {
      const res = await s.request('GET', url, { token });
      assert.equal(res.status, 200, res.text);
      assert.ok(Array.isArray(res.json));
      pages.push(res.json.map((item: { id: string }) => item.id));
      url = nextOf(res);
      assert.ok(pages.length < 1000, 'the pages end');
    }
    return pages;
  };

  const createApps = async (token: string, count: number, label = 'pg'): Promise<string[]> => {
    const ids: string[] = [];
    for (let i = 0; i < count; i += 1) {
      const subdomain = uniqueSubdomain(label);
      const res = await s.request('POST', '/api/v1/deployments', { token, body: { name: subdomain, subdomain, source_type: 'archive' } });
      assert.equal(res.status, 201, res.text);
      ids.push(res.json.id);
    }
    return ids;
  };

  test('deployments: pages of `limit`, newest first, a next link while more follow, the same items as one page', async () => {
    const user = await s.newUser('pages');
    const created = await createApps(user.token, 7);
    const newestFirst = [...created].reverse();

    const all = await s.request('GET', '/api/v1/deployments', { token: user.token });
    assert.deepEqual(
      all.json.map((d: { id: string }) => d.id),
      newestFirst,
    );
    assert.equal(all.headers.get('link'), null, 'no next link when everything fits');

    const first = await s.request('GET', '/api/v1/deployments?limit=3', { token: user.token });
    assert.equal(first.json.length, 3);
    assert.match(first.headers.get('link') ?? '', /^<\/api\/v1\/deployments\?cursor=[A-Za-z0-9_-]+&limit=3>; rel="next"$/);
    assert.deepEqual(Object.keys(first.json[0]).sort(), Object.keys(all.json[0]).sort(), 'a page shows what the list showed');

    const pages = await walk(user.token, '/api/v1/deployments?limit=3');
    assert.deepEqual(pages, [newestFirst.slice(0, 3), newestFirst.slice(3, 6), newestFirst.slice(6)]);

    // A page that holds exactly the rest has no next link (no empty last page).
    const seven = await walk(user.token, '/api/v1/deployments?limit=7');
    assert.deepEqual(seven.flat(), newestFirst);
    assert.deepEqual(seven, [newestFirst], 'a page that holds the rest has no next link');
  });

  test('the default page is 100 items, and the next link carries limit=100', async () => {
    const user = await s.newUser('pagesdefault');
    // The oldest first; the 100 newer ones five at a time (their order among themselves is not asserted here).
    const created = await createApps(user.token, 1, 'pd');
    for (let batch = 0; batch < 20; batch += 1) {
      created.push(...(await Promise.all(Array.from({ length: 5 }, async () => (await createApps(user.token, 1, 'pd'))[0] as string))));
    }
    const first = await s.request('GET', '/api/v1/deployments', { token: user.token });
    assert.equal(first.json.length, 100);
    assert.match(first.headers.get('link') ?? '', /&limit=100>; rel="next"$/);
    const second = await s.request('GET', nextOf(first) ?? '', { token: user.token });
    assert.deepEqual(
      second.json.map((d: { id: string }) => d.id),
      [created[0]],
    );
    assert.equal(second.headers.get('link'), null);
    const most = await s.request('GET', '/api/v1/deployments?limit=500', { token: user.token });
    assert.equal(most.json.length, 101);
  });

  test("the next link keeps the request's other query parameters", async () => {
    const user = await s.newUser('pagesquery');
    await createApps(user.token, 2);
    const res = await s.request('GET', '/api/v1/deployments?view=compact&limit=1&x=a%26b', { token: user.token });
    const next = nextOf(res) ?? '';
    const query = new URL(next, 'http://placeholder').searchParams;
    assert.equal(query.get('view'), 'compact');
    assert.equal(query.get('x'), 'a&b');
    assert.equal(query.get('limit'), '1');
    assert.ok((query.get('cursor') ?? '').length > 0);
    assert.equal(query.getAll('limit').length, 1);
  });

  test('a bad limit is 400 validation_error on every list', async () => {
    const user = await s.newUser('pageslimit');
    const [id] = await createApps(user.token, 1);
    for (const list of ['/api/v1/deployments', `/api/v1/deployments/${id}/builds`, '/api/v1/api-keys']) {
      for (const query of ['limit=0', 'limit=501', 'limit=1.5', 'limit=-1', 'limit=abc', 'limit=', 'limit=1e2', 'limit=%201', 'limit=2&limit=3', 'limit=0x10']) {
        assertError(await s.request('GET', `${list}?${query}`, { token: user.token }), 400, 'validation_error', `${list}?${query}`);
      }
      for (const query of ['limit=1', 'limit=500']) {
        assert.equal((await s.request('GET', `${list}?${query}`, { token: user.token })).status, 200, `${list}?${query}`);
      }
    }
  });

  test('a bad, tampered, or foreign cursor is 400 validation_error, never another page', async () => {
    const alice = await s.newUser('pagesalice');
    const bob = await s.newUser('pagesbob');
    const [aliceApp] = await createApps(alice.token, 3);
    await createApps(bob.token, 3);
    await s.request('POST', '/api/v1/api-keys', { token: alice.token, body: { name: 'second' } });

    const cursorOf = async (token: string, url: string): Promise<string> => {
      const next = nextOf(await s.request('GET', url, { token }));
      assert.ok(next !== undefined, `${url} has a next page`);
      return new URL(next, 'http://placeholder').searchParams.get('cursor') ?? '';
    };
    const deploymentsCursor = await cursorOf(alice.token, '/api/v1/deployments?limit=1');
    const keysCursor = await cursorOf(alice.token, '/api/v1/api-keys?limit=1');
    // A cursor is usable once it is right: the control.
    assert.equal((await s.request('GET', `/api/v1/deployments?limit=1&cursor=${deploymentsCursor}`, { token: alice.token })).status, 200);

    const flip = (c: string, at: number): string => c.slice(0, at) + (c[at] === 'A' ? 'B' : 'A') + c.slice(at + 1);
    const bad: Array<[string, string, string]> = [
      ['garbage', '/api/v1/deployments', 'not-a-cursor'],
      ['empty', '/api/v1/deployments', ''],
      ['not base64url', '/api/v1/deployments', 'abc%2Bdef'],
      ['tampered (first character)', '/api/v1/deployments', flip(deploymentsCursor, 0)],
      ['tampered (middle)', '/api/v1/deployments', flip(deploymentsCursor, Math.floor(deploymentsCursor.length / 2))],
      ['tampered (last character)', '/api/v1/deployments', flip(deploymentsCursor, deploymentsCursor.length - 1)],
      ['truncated', '/api/v1/deployments', deploymentsCursor.slice(0, -4)],
      ['too long', '/api/v1/deployments', 'A'.repeat(2000)],
      ['another list (keys on deployments)', '/api/v1/deployments', keysCursor],
      ['another list (deployments on keys)', '/api/v1/api-keys', deploymentsCursor],
      ['another list (deployments on builds)', `/api/v1/deployments/${aliceApp}/builds`, deploymentsCursor],
    ];
    for (const [what, list, cursor] of bad) {
      assertError(await s.request('GET', `${list}?limit=1&cursor=${cursor}`, { token: alice.token }), 400, 'validation_error', what);
    }
    // Another user's cursor does not open: the same 400, for bob, on his own list.
    assertError(await s.request('GET', `/api/v1/deployments?limit=1&cursor=${deploymentsCursor}`, { token: bob.token }), 400, 'validation_error', "alice's cursor used by bob");
    assertError(await s.request('GET', `/api/v1/api-keys?limit=1&cursor=${keysCursor}`, { token: bob.token }), 400, 'validation_error', "alice's key cursor used by bob");
    // Repeated cursors are refused like repeated limits.
    assertError(
      await s.request('GET', `/api/v1/deployments?cursor=${deploymentsCursor}&cursor=${deploymentsCursor}`, { token: alice.token }),
      400,
      'validation_error',
      'repeated cursor',
    );
  });

  test('a cursor stays right when items are created and deleted between pages: none skipped, none repeated', async () => {
    const user = await s.newUser('pagesstable');
    const ids = await createApps(user.token, 10, 'st'); // ids[0] oldest … ids[9] newest
    const del = async (id: string | undefined): Promise<void> => {
      assert.equal((await s.request('DELETE', `/api/v1/deployments/${id}`, { token: user.token })).status, 204);
    };

    const page1 = await s.request('GET', '/api/v1/deployments?limit=4', { token: user.token });
    const seen1: string[] = page1.json.map((d: { id: string }) => d.id);
    assert.deepEqual(seen1, [ids[9], ids[8], ids[7], ids[6]]);
    // Between pages: delete the page's last item (the cursor's own position), an item already shown,
    // one not yet shown; create two newer ones.
    await del(ids[6]);
    await del(ids[8]);
    await del(ids[4]);
    const added = await createApps(user.token, 2, 'st');

    const page2 = await s.request('GET', nextOf(page1) ?? '', { token: user.token });
    assert.equal(page2.status, 200, page2.text);
    const seen2: string[] = page2.json.map((d: { id: string }) => d.id);
    const next2 = nextOf(page2);
    assert.ok(next2 !== undefined, 'five items remain after the second page began');
    const rest = (await walk(user.token, next2)).flat();
    const seen = [...seen1, ...seen2, ...rest];

    assert.equal(new Set(seen).size, seen.length, `no item is repeated: ${seen.join(' ')}`);
    const throughout = [ids[0], ids[1], ids[2], ids[3], ids[5], ids[7], ids[9]];
    for (const id of throughout) assert.ok(seen.includes(id as string), `${id} existed throughout and was seen`);
    assert.deepEqual([...seen2, ...rest], [ids[5], ids[3], ids[2], ids[1], ids[0]], 'the pages go on from where the first one stopped');
    for (const id of added) assert.ok(!seen.includes(id), 'items newer than the first page belong before it, not after');
  });

  test('isolation: pages hold only the caller\'s items, and a cursor never reaches another user\'s list', async () => {
    const alice = await s.newUser('isoa');
    const bob = await s.newUser('isob');
    const aliceApps = await createApps(alice.token, 3, 'ia');
    const bobApps = await createApps(bob.token, 3, 'ib');
    const alicePages = (await walk(alice.token, '/api/v1/deployments?limit=1')).flat();
    assert.deepEqual(alicePages, [...aliceApps].reverse());
    const bobPages = (await walk(bob.token, '/api/v1/deployments?limit=2')).flat();
    assert.deepEqual(bobPages, [...bobApps].reverse());
    // Bob's builds list with alice's app id is 404 (as without a cursor), whatever the query.
    assertError(await s.request('GET', `/api/v1/deployments/${aliceApps[0]}/builds?limit=1`, { token: bob.token }), 404, 'not_found');
    // Keys: each sees their own, a page at a time.
    const keys = (await walk(alice.token, '/api/v1/api-keys?limit=1')).flat();
    const listed = await s.request('GET', '/api/v1/api-keys', { token: alice.token });
    assert.deepEqual(
      keys,
      listed.json.map((k: { id: string }) => k.id),
    );
    const bobKeys = (await s.request('GET', '/api/v1/api-keys', { token: bob.token })).json.map((k: { id: string }) => k.id);
    assert.ok(keys.every((id) => !bobKeys.includes(id)));
  });

  test('API keys: pages newest first; a revoked key between pages skips nothing else', async () => {
    const user = await s.newUser('pageskeys');
    const made: string[] = [];
    for (let i = 0; i < 5; i += 1) {
      const res = await s.request('POST', '/api/v1/api-keys', { token: user.token, body: { name: `k${i}` } });
      assert.equal(res.status, 201, res.text);
      made.push(res.json.api_key.id);
    }
    const whole = (await s.request('GET', '/api/v1/api-keys', { token: user.token })).json.map((k: { id: string }) => k.id);
    assert.equal(whole.length, 6, "five keys and newUser()'s");
    const pages = await walk(user.token, '/api/v1/api-keys?limit=2');
    assert.deepEqual(pages.flat(), whole);
    assert.deepEqual(
      pages.map((p) => p.length),
      [2, 2, 2],
    );

    const page1 = await s.request('GET', '/api/v1/api-keys?limit=2', { token: user.token });
    assert.equal((await s.request('DELETE', `/api/v1/api-keys/${page1.json[1].id}`, { token: user.token })).status, 204);
    const after1 = (await walk(user.token, nextOf(page1) ?? '')).flat();
    assert.deepEqual(after1, whole.slice(2));
  });

  test("builds: a deployment's builds a page at a time, newest first", async () => {
    const user = await s.newUser('pagesbuilds');
    const subdomain = uniqueSubdomain('pb');
    const created = await s.request('POST', '/api/v1/deployments', { token: user.token, body: { name: subdomain, subdomain, source_type: 'archive' } });
    const id = created.json.id as string;
    // A build that fails at once (no shell in an empty image): each deploy still leaves its record.
    const archive = makeTarGz([{ path: 'Dockerfile', content: 'FROM scratch\nRUN ["/nothing-here"]\n' }]);
    assert.equal((await upload(s, user.token, id, archive)).status, 200);
    const builds: string[] = [];
    for (let i = 0; i < 3; i += 1) {
      const res = await s.request('POST', `/api/v1/deployments/${id}/deploy?wait=true`, { token: user.token });
      assert.equal(res.status, 500, res.text);
      const list = await s.request('GET', `/api/v1/deployments/${id}/builds?limit=1`, { token: user.token });
      builds.push(list.json[0].id);
    }
    assert.equal(new Set(builds).size, 3);
    const pages = await walk(user.token, `/api/v1/deployments/${id}/builds?limit=2`);
    assert.deepEqual(pages, [
      [builds[2], builds[1]],
      [builds[0]],
    ]);
    const first = await s.request('GET', `/api/v1/deployments/${id}/builds?limit=2`, { token: user.token });
    assert.match(first.headers.get('link') ?? '', new RegExp(`^</api/v1/deployments/${id}/builds\\?cursor=[A-Za-z0-9_-]+&limit=2>; rel="next"$`));
    // A builds cursor of one deployment does not open on another of the same user.
    const [other] = await createApps(user.token, 1, 'pbo');
    const cursor = new URL(nextOf(first) ?? '', 'http://placeholder').searchParams.get('cursor');
    assertError(await s.request('GET', `/api/v1/deployments/${other}/builds?cursor=${cursor}`, { token: user.token }), 400, 'validation_error');
  });

  test('the OpenAPI document describes limit, cursor and the Link header of every list', async () => {
    const doc = (await s.request('GET', '/api/v1/openapi.json')).json;
    for (const path of ['/api/v1/deployments', '/api/v1/deployments/{id}/builds', '/api/v1/api-keys']) {
      const get = doc.paths[path].get;
      const params = get.parameters.filter((p: { in: string }) => p.in === 'query');
      assert.deepEqual(params.map((p: { name: string }) => p.name).sort(), ['cursor', 'limit'], path);
      const limit = params.find((p: { name: string }) => p.name === 'limit');
      assert.match(limit.description ?? limit.schema.description, /1–500.*default 100/, path);
      assert.ok(get.responses['200'].headers?.Link, `${path}: Link header documented`);
      assert.ok(get.responses['400'], `${path}: 400 documented`);
    }
  });
});
