// API tests: a deployment's environment variables (decisions §9) — GET/PATCH, every validation rule, atomic changes, write-only secrets, volumes field.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { assertError, assertNoLeak } from '../helpers/api-assert.js';
import { startTestServer, type HttpResult, type TestServer } from '../helpers/server.js';

let counter = 0;
const fresh = (label = 'env'): string => `${label}-${process.pid}-${(counter += 1)}`;
const KiB = 1024;

describe('environment variables', () => {
  let s: TestServer;
  let user: Awaited<ReturnType<TestServer['newUser']>>;
  before(async () => {
    s = await startTestServer();
    user = await s.newUser('config');
  });
  after(async () => {
    await s.close();
  });

  async function newDeployment(extra: Record<string, unknown> = {}): Promise<string> {
    const res = await s.request('POST', '/api/v1/deployments', { token: user.token, body: { name: 'cfg', subdomain: fresh(), source_type: 'archive', ...extra } });
    assert.equal(res.status, 201, res.text);
    return res.json.id as string;
  }
  const getEnv = (id: string): Promise<HttpResult> => s.request('GET', `/api/v1/deployments/${id}/env`, { token: user.token });
  const patchEnv = (id: string, body: unknown): Promise<HttpResult> => s.request('PATCH', `/api/v1/deployments/${id}/env`, { token: user.token, body });
  const pairs = (res: HttpResult): Array<[string, string | null, boolean]> => res.json.vars.map((v: { key: string; value: string | null; secret: boolean }) => [v.key, v.value, v.secret]);

  test('a new deployment has no variables; PATCH sets several at once and answers the sorted list, as GET does', async () => {
    const id = await newDeployment();
    const empty = await getEnv(id);
    assert.equal(empty.status, 200);
    assert.deepEqual(empty.json, { vars: [] });
    const set = await patchEnv(id, { vars: { ZED: 'last', ALPHA: 'first', _under: '', lower_case: 'x y\nz' } });
    assert.equal(set.status, 200, set.text);
    assert.deepEqual(pairs(set), [['ALPHA', 'first', false], ['ZED', 'last', false], ['_under', '', false], ['lower_case', 'x y\nz', false]]);
    for (const v of set.json.vars) {
      assert.deepEqual(Object.keys(v).sort(), ['key', 'secret', 'updated_at', 'value']);
      assert.match(v.updated_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/);
    }
    assert.deepEqual((await getEnv(id)).json, set.json);
  });

  test('null removes a key, in the same atomic change that sets others; removing an absent key is no error', async () => {
    const id = await newDeployment();
    await patchEnv(id, { vars: { A: '1', B: '2', C: '3' } });
    const before = (await getEnv(id)).json.vars;
    const res = await patchEnv(id, { vars: { A: null, C: 'three', D: '4', NEVER_SET: null } });
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(pairs(res), [['B', '2', false], ['C', 'three', false], ['D', '4', false]]);
    const b = res.json.vars.find((v: { key: string }) => v.key === 'B');
    assert.equal(b.updated_at, before.find((v: { key: string }) => v.key === 'B').updated_at, 'an untouched key keeps its updated_at');
  });

  test('secrets are write-only: value null in every answer, the value nowhere in any response', async () => {
    const secretValue = `sk_live_${process.pid}_never_shown`;
    const id = await newDeployment();
    const res = await patchEnv(id, { vars: { API_TOKEN: secretValue, OTHER_SECRET: 'x' }, secret: true });
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(pairs(res), [['API_TOKEN', null, true], ['OTHER_SECRET', null, true]]);
    await patchEnv(id, { vars: { VISIBLE: 'shown' }, secret: false });
    const responses = [
      res,
      await getEnv(id),
      await s.request('GET', `/api/v1/deployments/${id}`, { token: user.token }),
      await s.request('GET', '/api/v1/deployments', { token: user.token }),
      await patchEnv(id, { vars: { 'bad key': secretValue } }),
      await patchEnv(id, { vars: { API_TOKEN: `${secretValue}\u0000` }, secret: true }),
    ];
    for (const r of responses) assertNoLeak(r, [secretValue]);
    assert.deepEqual(pairs(await getEnv(id)), [['API_TOKEN', null, true], ['OTHER_SECRET', null, true], ['VISIBLE', 'shown', false]]);
    // The flag follows the latest write of a key: set without `secret`, a key is an ordinary variable again.
    assert.deepEqual(pairs(await patchEnv(id, { vars: { OTHER_SECRET: 'now plain' } })).find((p) => p[0] === 'OTHER_SECRET'), ['OTHER_SECRET', 'now plain', false]);
  });

  test('every validation rule of §9 answers 400 validation_error naming the key, and changes nothing', async () => {
    const id = await newDeployment();
    await patchEnv(id, { vars: { KEEP: 'kept' } });
    const snapshot = (await getEnv(id)).json;
    const cases: Array<[string, unknown, RegExp]> = [
      ['key starting with a digit', { vars: { '1ABC': 'x' } }, /"1ABC"/],
      ['key with a dash', { vars: { 'MY-KEY': 'x' } }, /"MY-KEY"/],
      ['key with a space', { vars: { 'MY KEY': 'x' } }, /"MY KEY"/],
      ['key with a dot', { vars: { 'a.b': 'x' } }, /"a\.b"/],
      ['non-ASCII key', { vars: { 'CLÉ': 'x' } }, /"CLÉ"/],
      ['empty key', { vars: { '': 'x' } }, /""/],
      ['key of 257 characters', { vars: { ['K'.repeat(257)]: 'x' } }, /"KKKK.*256/],
      ['PORT is reserved', { vars: { PORT: '9000' } }, /"PORT" is reserved/],
      ['SLIPWAY_ prefix is reserved', { vars: { SLIPWAY_TOKEN: 'x' } }, /"SLIPWAY_TOKEN".*reserved/],
      ['bare SLIPWAY_ is reserved', { vars: { SLIPWAY_: 'x' } }, /"SLIPWAY_".*reserved/],
      ['SLIPWAY_STACK naming no stack', { vars: { SLIPWAY_STACK: 'ruby' } }, /^variable "SLIPWAY_STACK" picks the stack of a build without a Dockerfile: one of node, python, go, static, not "ruby"$/],
      ['SLIPWAY_STACK as a secret', { vars: { SLIPWAY_STACK: 'node' }, secret: true }, /^variable "SLIPWAY_STACK" is read by the build, which sees no secret: set it as a plain variable$/],
      ['value with NUL', { vars: { NUL_VALUE: 'a\u0000b' } }, /"NUL_VALUE".*NUL/],
      ['value over 32 KiB (bytes, not characters)', { vars: { BIG: 'é'.repeat(16 * KiB + 1) } }, /"BIG".*32768 bytes/],
      ['value a number', { vars: { NUMBER: 5 } }, /NUMBER/],
      ['value an object', { vars: { OBJ: { a: 1 } } }, /OBJ/],
      ['value true', { vars: { BOOL: true } }, /BOOL/],
      ['one bad key among good ones: nothing is set', { vars: { GOOD: 'x', 'BAD-ONE': 'y', KEEP: null } }, /"BAD-ONE"/],
      ['vars missing', { secret: true }, /vars/],
      ['vars not an object', { vars: ['A=1'] }, /vars/],
      ['vars empty', { vars: {} }, /vars is empty/],
      ['secret not a boolean', { vars: { A: 'x' }, secret: 'yes' }, /secret/],
      ['unknown field', { vars: { A: 'x' }, extra: 1 }, /unknown field.*extra/],
    ];
    for (const [what, body, pattern] of cases) {
      const res = await patchEnv(id, body);
      assertError(res, 400, 'validation_error', what);
      assert.match(res.json.message, pattern, what);
    }
    assertError(await s.request('PATCH', `/api/v1/deployments/${id}/env`, { token: user.token, raw: '{"vars":', headers: { 'content-type': 'application/json' } }), 400, 'validation_error', 'malformed JSON');
    assertError(await s.request('PATCH', `/api/v1/deployments/${id}/env`, { token: user.token, raw: 'A=1', headers: { 'content-type': 'text/plain' } }), 415, 'unsupported_media_type');
    assertError(
      await s.request('PATCH', `/api/v1/deployments/${id}/env`, { token: user.token, raw: '{"vars":{"__proto__":"x"}}', headers: { 'content-type': 'application/json' } }),
      400,
      'validation_error',
      'a __proto__ key',
    );
    assert.deepEqual((await getEnv(id)).json, snapshot, 'nothing changed');
  });

  test('limits at their edges: a 256-character key and a 32 KiB value pass; PORT in lower case is an ordinary name; SLIPWAY_STACK naming a stack', async () => {
    const id = await newDeployment();
    const res = await patchEnv(id, { vars: { ['K'.repeat(256)]: 'x', EXACT: 'a'.repeat(32 * KiB), port: '1', SLIPWAYX: '2', SLIPWAY_STACK: 'python' } });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.json.vars.length, 5);
  });

  test('at most 500 variables per deployment: the 501st is refused naming it', async () => {
    const id = await newDeployment();
    const vars: Record<string, string> = {};
    for (let i = 0; i < 500; i++) vars[`VAR_${i}`] = String(i);
    const full = await patchEnv(id, { vars });
    assert.equal(full.status, 200, full.text);
    assert.equal(full.json.vars.length, 500);
    const more = await patchEnv(id, { vars: { ONE_TOO_MANY: 'x' } });
    assertError(more, 400, 'validation_error');
    assert.match(more.json.message, /"ONE_TOO_MANY".*500/);
    // Replacing and removing stay possible at the limit, in one change.
    assert.equal((await patchEnv(id, { vars: { VAR_0: null, REPLACEMENT: 'y' } })).status, 200);
    assert.equal((await getEnv(id)).json.vars.length, 500);
  });

  test('at most 256 KiB of names and values per deployment', async () => {
    const id = await newDeployment();
    const big = 'v'.repeat(32 * KiB);
    const vars: Record<string, string> = {};
    for (let i = 0; i < 7; i++) vars[`BIG_${i}`] = big;
    assert.equal((await patchEnv(id, { vars })).status, 200);
    const over = await patchEnv(id, { vars: { BIG_LAST: big } });
    assertError(over, 400, 'validation_error');
    assert.match(over.json.message, /"BIG_LAST".*262144 bytes/);
    assert.equal((await getEnv(id)).json.vars.length, 7);
  });

  test('non-UUID and unknown deployment ids are 404; no bearer is 401', async () => {
    for (const bad of ['not-a-uuid', '00000000-0000-4000-8000-000000000000']) {
      assertError(await s.request('GET', `/api/v1/deployments/${bad}/env`, { token: user.token }), 404, 'not_found');
      assertError(await s.request('PATCH', `/api/v1/deployments/${bad}/env`, { token: user.token, body: { vars: { A: '1' } } }), 404, 'not_found');
    }
    const id = await newDeployment();
    assert.equal((await s.request('GET', `/api/v1/deployments/${id}/env`)).status, 401);
    assert.equal((await s.request('PATCH', `/api/v1/deployments/${id}/env`, { body: { vars: { A: '1' } } })).status, 401);
  });

  test('variables go with their deployment when it is deleted', async () => {
    const id = await newDeployment();
    await patchEnv(id, { vars: { GONE: 'soon' } });
    assert.equal((await s.request('DELETE', `/api/v1/deployments/${id}`, { token: user.token })).status, 204);
    assertError(await getEnv(id), 404, 'not_found');
  });

  test('the OpenAPI document describes the env endpoints and the volumes field', async () => {
    const doc = (await s.request('GET', '/api/v1/openapi.json')).json;
    const env = doc.paths['/api/v1/deployments/{id}/env'];
    assert.ok(env?.get && env?.patch, 'GET and PATCH documented');
    assert.ok(env.patch.requestBody.content['application/json'].schema.properties.vars);
    assert.ok(env.patch.responses['400'] && env.get.responses['404']);
    const create = doc.paths['/api/v1/deployments'].post.requestBody.content['application/json'].schema;
    assert.ok(create.properties.volumes, 'volumes on create');
    assert.ok(doc.paths['/api/v1/deployments/{id}'].patch.requestBody.content['application/json'].schema.properties.volumes, 'volumes on PATCH');
  });
});

describe('volumes field', () => {
  let s: TestServer;
  let user: Awaited<ReturnType<TestServer['newUser']>>;
  before(async () => {
    s = await startTestServer();
    user = await s.newUser('volumes');
  });
  after(async () => {
    await s.close();
  });

  const create = (volumes: unknown): Promise<HttpResult> =>
    s.request('POST', '/api/v1/deployments', { token: user.token, body: { name: 'vol', subdomain: fresh('vol'), source_type: 'archive', volumes } });

  test('create and PATCH take volumes; GET shows them (names folded to lower case); absent means none', async () => {
    const res = await create([{ name: 'Data', mount_path: '/var/lib/data' }, { name: 'uploads', mount_path: '/app/uploads' }]);
    assert.equal(res.status, 201, res.text);
    const got = await s.request('GET', `/api/v1/deployments/${res.json.id}`, { token: user.token });
    assert.deepEqual(got.json.volumes, [{ name: 'data', mount_path: '/var/lib/data' }, { name: 'uploads', mount_path: '/app/uploads' }]);
    const patched = await s.request('PATCH', `/api/v1/deployments/${res.json.id}`, { token: user.token, body: { volumes: [{ name: 'data', mount_path: '/data' }] } });
    assert.equal(patched.status, 200, patched.text);
    assert.deepEqual(patched.json.volumes, [{ name: 'data', mount_path: '/data' }]);
    const none = await create(undefined);
    assert.deepEqual((await s.request('GET', `/api/v1/deployments/${none.json.id}`, { token: user.token })).json.volumes, []);
    const ten = Array.from({ length: 10 }, (_, i) => ({ name: `v${i}`, mount_path: `/mnt/v${i}` }));
    assert.equal((await create(ten)).status, 201, 'ten volumes');
  });

  test('every volume rule answers 400 validation_error naming the volume, and creates or changes nothing', async () => {
    const ok = await create([{ name: 'keep', mount_path: '/keep' }]);
    const cases: Array<[string, unknown, RegExp]> = [
      ['eleven volumes', Array.from({ length: 11 }, (_, i) => ({ name: `v${i}`, mount_path: `/mnt/v${i}` })), /at most 10/],
      ['name not a DNS label (underscore)', [{ name: 'my_data', mount_path: '/d' }], /"my_data".*DNS label/],
      ['name starting with a dash', [{ name: '-data', mount_path: '/d' }], /"-data"/],
      ['name too long', [{ name: 'a'.repeat(64), mount_path: '/d' }], /DNS label/],
      ['empty name', [{ name: '', mount_path: '/d' }], /DNS label/],
      ['name used twice', [{ name: 'a', mount_path: '/a' }, { name: 'A', mount_path: '/b' }], /"a" is listed twice/],
      ['relative mount path', [{ name: 'a', mount_path: 'data' }], /"a".*absolute/],
      ['mount path /', [{ name: 'a', mount_path: '/' }], /"a".*not be "\/"/],
      ['mount path with ..', [{ name: 'a', mount_path: '/data/../etc' }], /"a".*"\.\."/],
      ['mount path with //', [{ name: 'a', mount_path: '/data//x' }], /"a".*normalized/],
      ['mount path with .', [{ name: 'a', mount_path: '/data/./x' }], /"a".*normalized/],
      ['mount path with a trailing /', [{ name: 'a', mount_path: '/data/' }], /"a".*normalized/],
      ['mount path with a control character', [{ name: 'a', mount_path: '/da\nta' }], /"a".*control/],
      ['mount path under /proc', [{ name: 'a', mount_path: '/proc/x' }], /"a".*\/proc/],
      ['two volumes on one path', [{ name: 'a', mount_path: '/d' }, { name: 'b', mount_path: '/d' }], /"b".*another volume/],
      ['not an array', { name: 'a', mount_path: '/d' }, /volumes/],
      ['unknown field in a volume', [{ name: 'a', mount_path: '/d', size: 1 }], /unknown field.*size/],
      ['missing mount_path', [{ name: 'a' }], /mount_path/],
    ];
    const list = async (): Promise<unknown> => (await s.request('GET', '/api/v1/deployments', { token: user.token })).json.map((d: { id: string }) => d.id);
    const before = await list();
    for (const [what, volumes, pattern] of cases) {
      const created = await create(volumes);
      assertError(created, 400, 'validation_error', `create: ${what}`);
      assert.match(created.json.message, pattern, `create: ${what}`);
      const patched = await s.request('PATCH', `/api/v1/deployments/${ok.json.id}`, { token: user.token, body: { volumes } });
      assertError(patched, 400, 'validation_error', `PATCH: ${what}`);
    }
    assert.deepEqual(await list(), before, 'nothing was created');
    assert.deepEqual((await s.request('GET', `/api/v1/deployments/${ok.json.id}`, { token: user.token })).json.volumes, [{ name: 'keep', mount_path: '/keep' }]);
  });
});
