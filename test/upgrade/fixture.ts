// The upgrade fixture: a list of steps, each creating some objects through a release's API and later finding them on the current code.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { appRequest, busyboxScriptArchive, eventually, upload } from '../helpers/apps.js';
import { BUSYBOX_IMAGE } from '../helpers/busybox-image.js';
import { startGitServer, type GitServer } from '../helpers/git-server.js';
import { pullRequestBody, pullRequestHeaders } from '../helpers/pull-requests.js';
import { ADMIN_EMAIL, ADMIN_PASSWORD, loginAs, request, type HttpResult, type RequestOptions } from '../helpers/server.js';

/** A running server (of whichever version) as the steps see it. */
export interface UpgradeServer {
  readonly url: string;
  readonly port: number;
  request(method: string, urlPath: string, options?: RequestOptions): Promise<HttpResult>;
  /** A fresh session of the first administrator. */
  admin(): Promise<string>;
}

/**
 * One step of the fixture: `create` runs on the old release and returns what it made (JSON);
 * `verify` runs on the current code after the upgrade and finds it all. A release that adds a kind
 * of object adds a step here (and moves PREVIOUS_RELEASE forward once it is itself released).
 */
export interface UpgradeStep<S = unknown> {
  readonly name: string;
  create(server: UpgradeServer, earlier: ReadonlyMap<string, unknown>): Promise<S>;
  verify(server: UpgradeServer, state: S, earlier: ReadonlyMap<string, unknown>): Promise<void>;
}

/** Declares a step with its own state type (the list holds them type-erased). */
function step<S>(definition: UpgradeStep<S>): UpgradeStep {
  return definition as UpgradeStep;
}

const ok = (res: HttpResult, status: number, what: string): HttpResult => {
  assert.equal(res.status, status, `${what}: ${res.status} ${res.text}`);
  return res;
};

export function serverAt(url: string): UpgradeServer {
  return {
    url,
    port: Number(new URL(url).port),
    request: (method, urlPath, options) => request(url, method, urlPath, options),
    admin: () => loginAs(url, ADMIN_EMAIL, ADMIN_PASSWORD),
  };
}

/** A busybox app that writes its GREETING and API_TOKEN (a secret) into the page it serves, at start. */
async function envEchoArchive(): Promise<Buffer> {
  return busyboxScriptArchive('mkdir -p /www; printf "greeting=%s token=%s\\n" "$GREETING" "$API_TOKEN" > /www/index.html; exec httpd -f -p "${PORT:-8080}" -h /www');
}

interface UserState {
  email: string;
  password: string;
  userId: string;
  apiKey: string;
  apiKeyId: string;
}

interface AppState {
  id: string;
  subdomain: string;
  greeting: string;
  token: string;
  builds: string[];
  domainId: string;
  hostname: string;
}

const tag = (): string => `${process.pid}-${crypto.randomBytes(3).toString('hex')}`;

/** The git server the previews step's repository lives on, from its `create` to the fixture's end (closeFixture). */
let gitServer: GitServer | undefined;

/** Stops what the fixture started besides the servers (its git server). */
export async function closeFixture(): Promise<void> {
  await gitServer?.close();
  gitServer = undefined;
}

interface PreviewState {
  id: string;
  subdomain: string;
  previewId: string;
  sha: string;
}

/** The fixture, in order: later steps may use what earlier ones made (by name). */
export const STEPS: readonly UpgradeStep[] = [
  step<UserState>({
    name: 'a user with a password and an API key',
    async create(s) {
      const admin = await s.admin();
      const email = `upgrade-${tag()}@test.local`;
      const password = `pw-${crypto.randomBytes(8).toString('hex')}`;
      const user = ok(await s.request('POST', '/api/v1/users', { token: admin, body: { email, password } }), 201, 'create user');
      const token = await loginAs(s.url, email, password);
      const key = ok(await s.request('POST', '/api/v1/api-keys', { token, body: { name: 'upgrade key' } }), 201, 'create key');
      return { email, password, userId: user.json.id as string, apiKey: key.json.key as string, apiKeyId: key.json.api_key.id as string };
    },
    async verify(s, state) {
      const token = await loginAs(s.url, state.email, state.password);
      const me = ok(await s.request('GET', '/api/v1/users/me', { token: state.apiKey }), 200, 'the API key still works');
      assert.equal(me.json.id, state.userId);
      const keys = ok(await s.request('GET', '/api/v1/api-keys', { token }), 200, 'list keys');
      assert.ok((keys.json as Array<{ id: string }>).some((k) => k.id === state.apiKeyId), 'the key is listed');
      const users = ok(await s.request('GET', '/api/v1/users?limit=100', { token: await s.admin() }), 200, 'list users');
      assert.ok((users.json as Array<{ email: string }>).some((u) => u.email === state.email), 'the user is listed');
    },
  }),
  step<{ id: string; name: string; member: string }>({
    name: 'a team with a member',
    async create(s, earlier) {
      const user = earlier.get('a user with a password and an API key') as UserState;
      const admin = await s.admin();
      const name = `Upgrade team ${tag()}`;
      const team = ok(await s.request('POST', '/api/v1/teams', { token: user.apiKey, body: { name } }), 201, 'create team');
      const adminEmail = ok(await s.request('GET', '/api/v1/users/me', { token: admin }), 200, 'me').json.email as string;
      ok(await s.request('POST', `/api/v1/teams/${team.json.id as string}/members`, { token: user.apiKey, body: { email: adminEmail, role: 'viewer' } }), 201, 'add member');
      return { id: team.json.id as string, name, member: adminEmail };
    },
    async verify(s, state, earlier) {
      const user = earlier.get('a user with a password and an API key') as UserState;
      const team = ok(await s.request('GET', `/api/v1/teams/${state.id}`, { token: user.apiKey }), 200, 'get team');
      assert.equal(team.json.name, state.name);
      const members = ok(await s.request('GET', `/api/v1/teams/${state.id}/members`, { token: user.apiKey }), 200, 'members');
      assert.deepEqual((members.json as Array<{ email: string; role: string }>).map((m) => [m.email, m.role]).sort(), [[state.member, 'viewer'], [user.email, 'owner']].sort());
    },
  }),
  step<AppState>({
    name: 'a live app with variables, a secret and a custom domain',
    async create(s, earlier) {
      const user = earlier.get('a user with a password and an API key') as UserState;
      const subdomain = `upgrade-${tag()}`;
      const created = ok(await s.request('POST', '/api/v1/deployments', { token: user.apiKey, body: { name: subdomain, subdomain, source_type: 'archive' } }), 201, 'create app');
      const id = created.json.id as string;
      const greeting = `hello-${tag()}`;
      const token = `sk_${crypto.randomBytes(12).toString('hex')}`;
      ok(await s.request('PATCH', `/api/v1/deployments/${id}/env`, { token: user.apiKey, body: { vars: { GREETING: greeting } } }), 200, 'set variable');
      ok(await s.request('PATCH', `/api/v1/deployments/${id}/env`, { token: user.apiKey, body: { vars: { API_TOKEN: token }, secret: true } }), 200, 'set secret');
      ok(await upload(s, user.apiKey, id, await envEchoArchive()), 200, 'upload');
      ok(await s.request('POST', `/api/v1/deployments/${id}/deploy?wait=true`, { token: user.apiKey }), 200, 'deploy');
      assert.equal((await appRequest(s.port, subdomain)).body, `greeting=${greeting} token=${token}\n`);
      const hostname = `${subdomain}.upgrade.example.test`;
      const domain = ok(await s.request('POST', `/api/v1/deployments/${id}/domains`, { token: user.apiKey, body: { hostname } }), 201, 'add domain');
      const builds = ok(await s.request('GET', `/api/v1/deployments/${id}/builds`, { token: user.apiKey }), 200, 'builds');
      return { id, subdomain, greeting, token, builds: (builds.json as Array<{ id: string }>).map((b) => b.id), domainId: domain.json.id as string, hostname };
    },
    async verify(s, state, earlier) {
      const user = earlier.get('a user with a password and an API key') as UserState;
      const app = ok(await s.request('GET', `/api/v1/deployments/${state.id}`, { token: user.apiKey }), 200, 'get app');
      assert.equal(app.json.subdomain, state.subdomain);
      const env = ok(await s.request('GET', `/api/v1/deployments/${state.id}/env`, { token: user.apiKey }), 200, 'env');
      assert.deepEqual(
        (env.json.vars as Array<{ key: string; value: string | null; secret: boolean }>).map((v) => [v.key, v.value, v.secret]),
        [['API_TOKEN', null, true], ['GREETING', state.greeting, false]],
      );
      const builds = ok(await s.request('GET', `/api/v1/deployments/${state.id}/builds`, { token: user.apiKey }), 200, 'builds');
      for (const id of state.builds) assert.ok((builds.json as Array<{ id: string }>).some((b) => b.id === id), `build ${id} kept`);
      const domains = ok(await s.request('GET', `/api/v1/deployments/${state.id}/domains`, { token: user.apiKey }), 200, 'domains');
      assert.ok((domains.json as Array<{ id: string; hostname: string }>).some((d) => d.id === state.domainId && d.hostname === state.hostname), 'the domain is kept');
      // The live app is served again through the edge, its secret readable by it.
      await eventually(async () => {
        const res = await appRequest(s.port, state.subdomain).catch(() => undefined);
        return res?.status === 200 && res.body === `greeting=${state.greeting} token=${state.token}\n` ? true : undefined;
      }, 60_000, 'the app to be served with its variables and secret');
      assert.equal((await s.request('GET', `/api/v1/deployments/${state.id}`, { token: user.apiKey })).json.status, 'running');
    },
  }),
  step<{ id: string; url: string }>({
    name: 'a git deployment with a push webhook',
    async create(s, earlier) {
      const user = earlier.get('a user with a password and an API key') as UserState;
      const subdomain = `upgrade-git-${tag()}`;
      const created = ok(await s.request('POST', '/api/v1/deployments', { token: user.apiKey, body: { name: subdomain, subdomain, repo_url: 'http://127.0.0.1:1/nothing.git' } }), 201, 'create git app');
      const id = created.json.id as string;
      const hook = ok(await s.request('POST', `/api/v1/deployments/${id}/webhook`, { token: user.apiKey }), 201, 'create webhook');
      return { id, url: hook.json.url as string };
    },
    async verify(s, state, earlier) {
      const user = earlier.get('a user with a password and an API key') as UserState;
      const hook = ok(await s.request('GET', `/api/v1/deployments/${state.id}/webhook`, { token: user.apiKey }), 200, 'get webhook');
      // The port is the new process's; the hook's path (its id) is what deliveries keep using.
      assert.equal(new URL(hook.json.url as string).pathname, new URL(state.url).pathname);
      assert.equal(hook.json.configured, true);
    },
  }),
  step<PreviewState>({
    name: 'a git deployment with a live preview of a pull request',
    async create(s, earlier) {
      const user = earlier.get('a user with a password and an API key') as UserState;
      gitServer ??= await startGitServer();
      const repo = `upgrade-pr-${tag()}`;
      const page = (body: string): Record<string, string> => ({
        Dockerfile: `FROM ${BUSYBOX_IMAGE}\nCOPY index.html /www/index.html\nEXPOSE 8080\nCMD ["/bin/sh", "-c", "exec httpd -f -p $PORT -h /www"]\n`,
        'index.html': body,
      });
      const { url } = await gitServer.createRepo(repo, page('main\n'));
      const subdomain = `upgrade-pr-${tag()}`;
      const created = ok(await s.request('POST', '/api/v1/deployments', { token: user.apiKey, body: { name: repo, subdomain, repo_url: url, branch: 'main', previews: true } }), 201, 'create git app with previews');
      const id = created.json.id as string;
      const hook = ok(await s.request('POST', `/api/v1/deployments/${id}/webhook`, { token: user.apiKey }), 201, 'create webhook');
      await gitServer.commit(repo, page('pull request one\n'), { branch: 'feature' });
      const sha = await gitServer.setRef(repo, 'refs/pull/1/head');
      const body = pullRequestBody('github', { action: 'opened', number: 1, headSha: sha, headBranch: 'feature' });
      const delivered = ok(await s.request('POST', `/api/v1/hooks/${id}`, { raw: body, headers: pullRequestHeaders('github', hook.json.secret as string, body) }), 202, 'pull request opened');
      const preview = await eventually(async () => {
        const res = await s.request('GET', `/api/v1/deployments/${id}/previews/1`, { token: user.apiKey });
        if (res.json?.status === 'failed') throw new Error(`the preview failed: ${res.text}`);
        return res.json?.status === 'running' ? res.json : undefined;
      }, 240_000, 'the preview to run');
      assert.equal((await appRequest(s.port, `${subdomain}-pr-1`)).body, 'pull request one\n');
      assert.equal(preview.id, delivered.json.deployment_id);
      return { id, subdomain, previewId: preview.id as string, sha };
    },
    async verify(s, state, earlier) {
      const user = earlier.get('a user with a password and an API key') as UserState;
      const preview = ok(await s.request('GET', `/api/v1/deployments/${state.id}/previews/1`, { token: user.apiKey }), 200, 'get preview');
      assert.deepEqual([preview.json.id, preview.json.commit_sha, preview.json.branch], [state.previewId, state.sha, 'feature']);
      await eventually(async () => {
        const res = await appRequest(s.port, `${state.subdomain}-pr-1`).catch(() => undefined);
        return res?.status === 200 && res.body === 'pull request one\n' ? true : undefined;
      }, 60_000, 'the preview to be served again');
    },
  }),
  step<{ ids: string[] }>({
    name: 'the audit log',
    async create(s) {
      const audit = ok(await s.request('GET', '/api/v1/audit?limit=100', { token: await s.admin() }), 200, 'audit');
      const ids = (audit.json as Array<{ id: string }>).map((e) => e.id);
      assert.ok(ids.length >= 5, `the fixture left audit entries (${ids.length})`);
      return { ids };
    },
    async verify(s, state) {
      const audit = ok(await s.request('GET', '/api/v1/audit?limit=200', { token: await s.admin() }), 200, 'audit');
      const now = new Set((audit.json as Array<{ id: string }>).map((e) => e.id));
      for (const id of state.ids) assert.ok(now.has(id), `audit entry ${id} kept`);
    },
  }),
];

/** Runs every step's `create` in order; resolves with each step's state by name. */
export async function createFixture(server: UpgradeServer): Promise<Map<string, unknown>> {
  const states = new Map<string, unknown>();
  for (const s of STEPS) states.set(s.name, await s.create(server, states));
  return states;
}

/** Runs every step's `verify` on what `createFixture` made. */
export async function verifyFixture(server: UpgradeServer, states: ReadonlyMap<string, unknown>): Promise<void> {
  for (const s of STEPS) await s.verify(server, states.get(s.name), states);
}

/**
 * A rolling upgrade's middle (PostgreSQL): `old` (the previous release) still runs on the database
 * `current` has just migrated. The old instance logs the fixture's user in, reads and creates a
 * deployment and sets a variable; the current one sees all of it.
 */
export async function rollingCheck(old: UpgradeServer, current: UpgradeServer, states: ReadonlyMap<string, unknown>): Promise<void> {
  const user = states.get('a user with a password and an API key') as UserState;
  const app = states.get('a live app with variables, a secret and a custom domain') as AppState;
  const token = await loginAs(old.url, user.email, user.password);
  assert.equal(ok(await old.request('GET', `/api/v1/deployments/${app.id}`, { token }), 200, 'the old instance reads an app').json.subdomain, app.subdomain);
  const subdomain = `upgrade-rolling-${tag()}`;
  const created = ok(await old.request('POST', '/api/v1/deployments', { token: user.apiKey, body: { name: subdomain, subdomain, source_type: 'archive' } }), 201, 'the old instance creates an app');
  const id = created.json.id as string;
  ok(await old.request('PATCH', `/api/v1/deployments/${id}/env`, { token: user.apiKey, body: { vars: { MADE_BY: 'the previous release' } } }), 200, 'the old instance sets a variable');
  const seen = ok(await current.request('GET', `/api/v1/deployments/${id}`, { token: user.apiKey }), 200, 'the current instance reads it');
  assert.equal(seen.json.subdomain, subdomain);
  const env = ok(await current.request('GET', `/api/v1/deployments/${id}/env`, { token: await loginAs(current.url, user.email, user.password) }), 200, 'its variables');
  assert.deepEqual((env.json.vars as Array<{ key: string; value: string | null }>).map((v) => [v.key, v.value]), [['MADE_BY', 'the previous release']]);
  ok(await current.request('DELETE', `/api/v1/deployments/${id}`, { token: user.apiKey }), 204, 'the current instance deletes it');
  assert.equal((await old.request('GET', `/api/v1/deployments/${id}`, { token: user.apiKey })).status, 404, 'and the old one sees it gone');
}
