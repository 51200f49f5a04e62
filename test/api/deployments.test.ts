// API tests: deployments — create (git and archive), every validation rule, subdomain uniqueness under concurrency, list, get, delete.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { assertError } from '../helpers/api-assert.js';
import { startTestServer, type HttpResult, type TestServer } from '../helpers/server.js';

const ARCHIVE_KEYS = ['created_at', 'id', 'name', 'source_type', 'status', 'subdomain', 'updated_at'];
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

let counter = 0;
/** A subdomain no other test uses. */
const fresh = (label = 'app'): string => `${label}-${process.pid}-${(counter += 1)}`;

describe('deployments', () => {
  let s: TestServer;
  let user: Awaited<ReturnType<TestServer['newUser']>>;
  before(async () => {
    s = await startTestServer();
    user = await s.newUser('deployer');
  });
  after(async () => {
    await s.close();
  });

  const create = (body: unknown, token = user.token): Promise<HttpResult> => s.request('POST', '/api/v1/deployments', { token, body });
  const listIds = async (token = user.token): Promise<string[]> =>
    (await s.request('GET', '/api/v1/deployments', { token })).json.map((d: { id: string }) => d.id);

  /** Asserts the request is refused as `code` and no deployment appeared. */
  async function assertRefused(body: unknown, code: string, what: string, status = 400): Promise<HttpResult> {
    const before = await listIds();
    const res = await create(body);
    assertError(res, status, code, what);
    assert.deepEqual(await listIds(), before, `${what}: nothing was created`);
    return res;
  }

  test('git create answers 201 with defaults: branch absent/null, dockerfile_path "Dockerfile"', async () => {
    const subdomain = fresh('git');
    const res = await create({ name: 'Git app', subdomain, repo_url: 'https://example.com/org/repo.git' });
    assert.equal(res.status, 201, res.text);
    assert.match(res.json.id, UUID);
    assert.equal(res.json.name, 'Git app');
    assert.equal(res.json.subdomain, subdomain);
    assert.equal(res.json.status, 'pending');
    assert.equal(res.json.source_type, 'git');
    assert.equal(res.json.repo_url, 'https://example.com/org/repo.git');
    assert.ok(res.json.branch === null || res.json.branch === undefined, `branch: ${res.json.branch}`);
    assert.equal(res.json.dockerfile_path, 'Dockerfile');
    assert.match(res.json.created_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/);
    assert.match(res.json.updated_at, /Z$/);
    assert.ok(!('password' in res.json) && !('user_id' in res.json));

    const full = await create({ name: 'g2', subdomain: fresh('git'), repo_url: 'git@github.com:org/repo.git', branch: 'release/v1.2', dockerfile_path: 'docker/Dockerfile.prod' });
    assert.equal(full.status, 201, full.text);
    assert.equal(full.json.branch, 'release/v1.2');
    assert.equal(full.json.dockerfile_path, 'docker/Dockerfile.prod');
    assert.equal((await create({ name: 'g3', subdomain: fresh('git'), repo_url: 'https://example.com/r', source_type: 'git' })).status, 201);
  });

  test('archive create answers 201 with exactly id, name, subdomain, status pending, source_type, created_at, updated_at', async () => {
    const subdomain = fresh('arc');
    const res = await create({ name: 'Archive app', subdomain, source_type: 'archive' });
    assert.equal(res.status, 201, res.text);
    assert.deepEqual(Object.keys(res.json).sort(), ARCHIVE_KEYS);
    assert.equal(res.json.status, 'pending');
    assert.equal(res.json.source_type, 'archive');
    assert.equal(res.json.subdomain, subdomain);
    const withPath = await create({ name: 'a2', subdomain: fresh('arc'), source_type: 'archive', dockerfile_path: 'build/Dockerfile' });
    assert.equal(withPath.status, 201, withPath.text);
    assert.deepEqual(Object.keys(withPath.json).sort(), ARCHIVE_KEYS);
    const got = await s.request('GET', `/api/v1/deployments/${withPath.json.id}`, { token: user.token });
    assert.equal(got.json.dockerfile_path, 'build/Dockerfile');
    assert.ok(!('repo_url' in got.json) && !('branch' in got.json), 'an archive deployment shows no git fields');
  });

  test('name is trimmed and must be 1-100 characters', async () => {
    const res = await create({ name: '  padded  ', subdomain: fresh(), source_type: 'archive' });
    assert.equal(res.status, 201);
    assert.equal(res.json.name, 'padded');
    assert.equal((await create({ name: 'x'.repeat(100), subdomain: fresh(), source_type: 'archive' })).status, 201);
    await assertRefused({ name: '', subdomain: fresh(), source_type: 'archive' }, 'validation_error', 'empty name');
    await assertRefused({ name: '   ', subdomain: fresh(), source_type: 'archive' }, 'validation_error', 'blank name');
    await assertRefused({ name: 'x'.repeat(101), subdomain: fresh(), source_type: 'archive' }, 'validation_error', '101 characters');
    await assertRefused({ subdomain: fresh(), source_type: 'archive' }, 'validation_error', 'no name');
  });

  test('subdomain: DNS label rules, upper case folded', async () => {
    const upper = `UPPER-${process.pid}-Case`;
    const res = await create({ name: 'u', subdomain: upper, source_type: 'archive' });
    assert.equal(res.status, 201, res.text);
    assert.equal(res.json.subdomain, upper.toLowerCase());
    assertError(await create({ name: 'u2', subdomain: upper.toLowerCase(), source_type: 'archive' }), 400, 'subdomain_taken', 'folded duplicate');
    assert.equal((await create({ name: 'one', subdomain: `a${process.pid}`.slice(0, 1), source_type: 'archive' })).status, 201, '1 character');
    assert.equal((await create({ name: '63', subdomain: `z${'0'.repeat(61)}z`, source_type: 'archive' })).status, 201, '63 characters');
    for (const [what, subdomain] of [
      ['empty', ''],
      ['64 characters', `y${'0'.repeat(62)}y`],
      ['leading hyphen', '-abc'],
      ['trailing hyphen', 'abc-'],
      ['underscore', 'my_app'],
      ['dot', 'my.app'],
      ['space', 'my app'],
      ['unicode', 'café'],
      ['slash', 'a/b'],
    ] as const) {
      await assertRefused({ name: 'bad', subdomain, source_type: 'archive' }, 'validation_error', `subdomain ${what}`);
    }
    await assertRefused({ name: 'bad', source_type: 'archive' }, 'validation_error', 'no subdomain');
  });

  test('reserved subdomains are 400 validation_error', async () => {
    for (const label of ['api', 'www', 'admin', 'app', 'dashboard', 'tunnel', 'API', 'Www']) {
      await assertRefused({ name: 'r', subdomain: label, source_type: 'archive' }, 'validation_error', `reserved ${label}`);
    }
  });

  test('subdomain_taken, also against another user', async () => {
    const subdomain = fresh('taken');
    assert.equal((await create({ name: 'first', subdomain, source_type: 'archive' })).status, 201);
    await assertRefused({ name: 'second', subdomain, source_type: 'archive' }, 'subdomain_taken', 'same user');
    const other = await s.newUser('other');
    const before = await listIds(other.token);
    assertError(await create({ name: 'theirs', subdomain, repo_url: 'https://example.com/r' }, other.token), 400, 'subdomain_taken', 'other user');
    assert.deepEqual(await listIds(other.token), before);
  });

  test('eight concurrent creates of one subdomain: exactly one wins', async () => {
    const subdomain = fresh('race');
    const others = await Promise.all([s.newUser('racer'), s.newUser('racer')]);
    const tokens = [user.token, user.apiKey, others[0].token, others[0].apiKey, others[1].token, others[1].apiKey, user.token, others[0].token];
    const results = await Promise.all(
      tokens.map((token, i) =>
        create(i % 2 === 0 ? { name: `race ${i}`, subdomain, source_type: 'archive' } : { name: `race ${i}`, subdomain, repo_url: 'https://example.com/r' }, token),
      ),
    );
    const won = results.filter((r) => r.status === 201);
    assert.equal(won.length, 1, results.map((r) => r.status).join(','));
    for (const r of results.filter((x) => x.status !== 201)) assertError(r, 400, 'subdomain_taken');
  });

  test('repo_url: accepted forms', async () => {
    for (const url of ['https://example.com/org/repo.git', 'http://example.com/repo', 'ssh://git@example.com/org/repo.git', 'git@example.com:org/repo.git']) {
      const res = await create({ name: 'ok', subdomain: fresh('url'), repo_url: url });
      assert.equal(res.status, 201, `${url}: ${res.text}`);
      assert.equal(res.json.repo_url, url);
    }
  });

  test('repo_url: option-like, ext::, shell and control characters, missing', async () => {
    for (const [what, repo_url] of [
      ['--upload-pack', '--upload-pack=x'],
      ['ext::', 'ext::sh -c x'],
      ['ext:: no space', 'ext::sh'],
      ['-oProxyCommand', '-oProxyCommand=x'],
      ['ssh -oProxyCommand host', 'ssh://-oProxyCommand=x/repo'],
      ['$(x)', 'https://example.com/$(x)'],
      ['$(x) alone', '$(x)'],
      ['backtick', 'https://example.com/`id`'],
      ['newline', 'https://example.com/repo\n--upload-pack=x'],
      ['space', 'https://example.com/a b'],
      ['ftp', 'ftp://example.com/repo'],
      ['no scheme', 'example.com/repo'],
      ['empty', ''],
      ['credentials', 'https://user:token@example.com/repo'],
    ] as const) {
      await assertRefused({ name: 'bad', subdomain: fresh('badurl'), repo_url }, 'validation_error', `repo_url ${what}`);
    }
    await assertRefused({ name: 'bad', subdomain: fresh('badurl') }, 'validation_error', 'git without repo_url');
    await assertRefused({ name: 'bad', subdomain: fresh('badurl'), repo_url: 42 }, 'validation_error', 'repo_url number');
  });

  test('branch rules', async () => {
    for (const branch of ['main', 'feature/x-1', 'v1.2.3']) {
      assert.equal((await create({ name: 'b', subdomain: fresh('br'), repo_url: 'https://example.com/r', branch })).status, 201, branch);
    }
    for (const branch of ['-x', '--upload-pack=x', 'a..b', 'a b', 'x.lock', 'a/x.lock', '$(x)', '`x`', 'a\nb', '', 'a~1', 'a^', 'a:b', '.hidden', 'end/', 'a//b', '@', 'a@{1}']) {
      await assertRefused({ name: 'b', subdomain: fresh('badbr'), repo_url: 'https://example.com/r', branch }, 'validation_error', `branch ${JSON.stringify(branch)}`);
    }
  });

  test('dockerfile_path: relative, inside the source', async () => {
    const ok = await create({ name: 'd', subdomain: fresh('df'), repo_url: 'https://example.com/r', dockerfile_path: './sub/Dockerfile' });
    assert.equal(ok.status, 201);
    assert.equal(ok.json.dockerfile_path, 'sub/Dockerfile');
    for (const [what, dockerfile_path] of [
      ['absolute', '/etc/passwd'],
      ['parent', '../Dockerfile'],
      ['inner parent', 'a/../../Dockerfile'],
      ['trailing parent', 'a/..'],
      ['empty', ''],
      ['backslash parent', '..\\Dockerfile'],
      ['NUL', 'a\u0000b'],
    ] as const) {
      await assertRefused({ name: 'd', subdomain: fresh('baddf'), repo_url: 'https://example.com/r', dockerfile_path }, 'validation_error', `git ${what}`);
      await assertRefused({ name: 'd', subdomain: fresh('baddf'), source_type: 'archive', dockerfile_path }, 'validation_error', `archive ${what}`);
    }
  });

  test('archive with repo_url or branch is 400 validation_error', async () => {
    await assertRefused({ name: 'a', subdomain: fresh('ab'), source_type: 'archive', repo_url: 'https://example.com/r' }, 'validation_error', 'repo_url');
    await assertRefused({ name: 'a', subdomain: fresh('ab'), source_type: 'archive', branch: 'main' }, 'validation_error', 'branch');
  });

  test('unknown fields are 400 validation_error naming them; wrong types are refused', async () => {
    const res = await assertRefused({ name: 'u', subdomain: fresh('unk'), source_type: 'archive', colour: 'red', flavour: 3 }, 'validation_error', 'unknown fields');
    assert.match(res.json.message, /colour/);
    assert.match(res.json.message, /flavour/);
    const one = await assertRefused({ name: 'u', subdomain: fresh('unk'), repo_url: 'https://example.com/r', user_id: 'x' }, 'validation_error', 'user_id');
    assert.match(one.json.message, /user_id/);
    for (const [what, body] of [
      ['name number', { name: 123, subdomain: fresh('ty'), source_type: 'archive' }],
      ['name null', { name: null, subdomain: fresh('ty'), source_type: 'archive' }],
      ['subdomain number', { name: 'n', subdomain: 12345, source_type: 'archive' }],
      ['source_type other', { name: 'n', subdomain: fresh('ty'), source_type: 'zip' }],
      ['source_type number', { name: 'n', subdomain: fresh('ty'), source_type: 1 }],
      ['dockerfile_path array', { name: 'n', subdomain: fresh('ty'), source_type: 'archive', dockerfile_path: ['Dockerfile'] }],
      ['branch boolean', { name: 'n', subdomain: fresh('ty'), repo_url: 'https://example.com/r', branch: true }],
      ['body array', [{ name: 'n', subdomain: fresh('ty'), source_type: 'archive' }]],
      ['body string', 'archive'],
      ['body null', null],
    ] as const) {
      await assertRefused(body, 'validation_error', what);
    }
  });

  test('list: own deployments only, newest first; GET one', async () => {
    const mine = await s.newUser('lister');
    const theirs = await s.newUser('lister');
    const ids: string[] = [];
    for (let i = 0; i < 3; i += 1) {
      const res = await create({ name: `n${i}`, subdomain: fresh('list'), source_type: 'archive' }, mine.token);
      ids.push(res.json.id);
      await create({ name: `t${i}`, subdomain: fresh('list'), repo_url: 'https://example.com/r' }, theirs.token);
    }
    const list = await s.request('GET', '/api/v1/deployments', { token: mine.apiKey });
    assert.equal(list.status, 200);
    assert.deepEqual(list.json.map((d: { id: string }) => d.id), [...ids].reverse());
    for (const d of list.json) {
      assert.equal(d.source_type, 'archive');
      assert.ok(['pending'].includes(d.status));
    }
    const one = await s.request('GET', `/api/v1/deployments/${ids[1]}`, { token: mine.token });
    assert.equal(one.status, 200);
    assert.equal(one.json.id, ids[1]);
    assert.equal(one.json.name, 'n1');
    assert.equal(one.json.status, 'pending');
    assert.equal(one.json.live_build_id ?? null, null);
    if (one.json.url !== undefined) assert.match(one.json.url, new RegExp(`^http://${one.json.subdomain}\\.localhost`));
    const fresh2 = await s.newUser('empty');
    assert.deepEqual((await s.request('GET', '/api/v1/deployments', { token: fresh2.token })).json, []);
  });

  test('a non-UUID or unknown id is 404 not_found naming the deployment', async () => {
    for (const id of ['nope', '123', '00000000-0000-4000-8000-000000000000', "1' OR '1'='1"]) {
      for (const [method, suffix] of [['GET', ''], ['DELETE', ''], ['POST', '/deploy'], ['POST', '/stop'], ['GET', '/builds']] as const) {
        const res = await s.request(method, `/api/v1/deployments/${encodeURIComponent(id)}${suffix}`, { token: user.token });
        assertError(res, 404, 'not_found', `${method} ${id}${suffix}`);
        assert.match(res.json.message, /deployment/i);
      }
    }
  });

  test('PATCH changes settings (null resets to the default) and refuses bad or foreign fields', async () => {
    const git = await create({ name: 'settings', subdomain: `set-${process.pid}`, repo_url: 'https://example.com/a.git' });
    assert.equal(git.status, 201, git.text);
    const id = git.json.id as string;
    const patch = (body: unknown): Promise<HttpResult> => s.request('PATCH', `/api/v1/deployments/${id}`, { token: user.token, body });

    const changed = await patch({ name: ' renamed ', branch: 'release/1', dockerfile_path: 'web/Dockerfile', health_check_path: '/up', memory_mb: 256, cpus: 0.5 });
    assert.equal(changed.status, 200, changed.text);
    assert.equal(changed.json.name, 'renamed');
    assert.equal(changed.json.branch, 'release/1');
    assert.equal(changed.json.dockerfile_path, 'web/Dockerfile');
    assert.equal(changed.json.health_check_path, '/up');
    assert.equal(changed.json.memory_mb, 256);
    assert.equal(changed.json.cpus, 0.5);
    assert.equal(changed.json.subdomain, `set-${process.pid}`);
    assert.ok(changed.json.updated_at >= git.json.updated_at);

    const reset = await patch({ branch: null, memory_mb: null, cpus: null, health_check_path: null });
    assert.equal(reset.status, 200, reset.text);
    assert.equal(reset.json.branch, null);
    assert.equal(reset.json.memory_mb, null);
    assert.equal(reset.json.cpus, null);
    assert.equal(reset.json.health_check_path, null);

    for (const [body, what] of [
      [{}, 'empty'],
      [{ subdomain: 'other' }, 'subdomain is not changeable'],
      [{ memory_mb: 1 }, 'memory too small'],
      [{ cpus: 0 }, 'cpus zero'],
      [{ dockerfile_path: '../x' }, 'dockerfile outside'],
      [{ branch: '--upload-pack=x' }, 'option-like branch'],
      [{ repo_url: 'ext::sh -c x' }, 'ext:: url'],
      [{ name: '' }, 'empty name'],
    ] as const) {
      assertError(await patch(body), 400, 'validation_error', what);
    }
    assert.equal((await s.request('GET', `/api/v1/deployments/${id}`, { token: user.token })).json.name, 'renamed');

    const archive = await create({ name: 'arch', subdomain: `set-a-${process.pid}`, source_type: 'archive' });
    assertError(await s.request('PATCH', `/api/v1/deployments/${archive.json.id}`, { token: user.token, body: { branch: 'main' } }), 400, 'validation_error', 'branch on archive');
  });

  test('memory_mb and cpus above the server ceilings (2048 MiB, 2 CPUs) are refused on create and PATCH', async () => {
    for (const [extra, field] of [
      [{ memory_mb: 2049 }, 'memory_mb'],
      [{ memory_mb: 65536 }, 'memory_mb'],
      [{ cpus: 2.01 }, 'cpus'],
      [{ cpus: 64 }, 'cpus'],
    ] as const) {
      const res = await create({ name: 'big', subdomain: fresh('big'), source_type: 'archive', ...extra });
      assertError(res, 400, 'validation_error', `create ${JSON.stringify(extra)}`);
      assert.match(res.json.message as string, new RegExp(`^${field} .*\\b(2048|2)\\b`));
    }
    const atCeiling = await create({ name: 'max', subdomain: fresh('max'), source_type: 'archive', memory_mb: 2048, cpus: 2 });
    assert.equal(atCeiling.status, 201, atCeiling.text);
    const id = atCeiling.json.id as string;
    const patch = (body: unknown): Promise<HttpResult> => s.request('PATCH', `/api/v1/deployments/${id}`, { token: user.token, body });
    const tooMuchMemory = await patch({ memory_mb: 4096 });
    assertError(tooMuchMemory, 400, 'validation_error', 'PATCH memory_mb');
    assert.match(tooMuchMemory.json.message as string, /^memory_mb /);
    const tooManyCpus = await patch({ cpus: 3 });
    assertError(tooManyCpus, 400, 'validation_error', 'PATCH cpus');
    assert.match(tooManyCpus.json.message as string, /^cpus /);
    const unchanged = await s.request('GET', `/api/v1/deployments/${id}`, { token: user.token });
    assert.equal(unchanged.json.memory_mb, 2048);
    assert.equal(unchanged.json.cpus, 2);
  });

  test('DELETE answers 204, then 404, and the subdomain is free again', async () => {
    const subdomain = fresh('del');
    const res = await create({ name: 'gone', subdomain, source_type: 'archive' });
    const del = await s.request('DELETE', `/api/v1/deployments/${res.json.id}`, { token: user.token });
    assert.equal(del.status, 204, del.text);
    assert.equal(del.text, '');
    assertError(await s.request('GET', `/api/v1/deployments/${res.json.id}`, { token: user.token }), 404, 'not_found');
    assertError(await s.request('DELETE', `/api/v1/deployments/${res.json.id}`, { token: user.token }), 404, 'not_found');
    assert.ok(!(await listIds()).includes(res.json.id));
    const again = await create({ name: 'again', subdomain, repo_url: 'https://example.com/r' });
    assert.equal(again.status, 201, again.text);
  });
});

describe('deployments without private git', () => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer({ SLIPWAY_ALLOW_PRIVATE_GIT: 'false' });
  });
  after(async () => {
    await s.close();
  });

  test('file:// and loopback/private repository hosts are 400 validation_error', async () => {
    const user = await s.newUser('private');
    for (const repo_url of [
      'file:///x',
      'file:///etc',
      'https://127.0.0.1/repo.git',
      'http://localhost/repo.git',
      'https://10.1.2.3/repo.git',
      'https://169.254.169.254/latest',
      'https://[::1]/repo.git',
      'ssh://git@192.168.1.1/repo.git',
      'git@127.0.0.1:repo.git',
    ]) {
      const res = await s.request('POST', '/api/v1/deployments', { token: user.token, body: { name: 'p', subdomain: `priv-${process.pid}`, repo_url } });
      assertError(res, 400, 'validation_error', repo_url);
    }
    assert.deepEqual((await s.request('GET', '/api/v1/deployments', { token: user.token })).json, []);
  });

  test('a public host that does not resolve from here is accepted at create time (checked again at deploy)', async () => {
    const user = await s.newUser('public');
    for (const [i, repo_url] of ['https://github.com/example/app.git', 'git@gitlab.example.invalid:team/app.git'].entries()) {
      const res = await s.request('POST', '/api/v1/deployments', { token: user.token, body: { name: 'pub', subdomain: `pub-${process.pid}-${i}`, repo_url } });
      assert.equal(res.status, 201, `${repo_url}: ${res.text}`);
      assert.equal(res.json.repo_url, repo_url);
    }
  });
});
