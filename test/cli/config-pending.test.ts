// `slipway env set` on a running app without a terminal (issue 33 item 2): nothing is restarted, the change is pending on the server, and `slipway env` and `slipway status` say which keys and how to apply them, until a restart.
import assert from 'node:assert/strict';
import fsp from 'node:fs/promises';
import { after, before, describe, test } from 'node:test';
import { busyboxArchive, createArchiveApp, deployAndWait, tempDir } from '../helpers/apps.js';
import { cli as runCli, type CliResult } from '../helpers/cli.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

describe('slipway and pending configuration', () => {
  let server: TestServer;
  let user: Awaited<ReturnType<TestServer['newUser']>>;
  let home: string;
  const cli = (args: string[]): Promise<CliResult> => runCli(args, { home, env: { SLIPWAY_URL: server.url, SLIPWAY_API_KEY: user.apiKey } });

  before(async () => {
    server = await startTestServer();
    user = await server.newUser('pendingcli');
    home = tempDir('pending-cli');
  });
  after(async () => {
    await server.close();
    await fsp.rm(home, { recursive: true, force: true });
  });

  test('env set --no-restart leaves the change pending; env and status say so until slipway restart; a script without a flag restarts, as documented', async () => {
    const app = await createArchiveApp(server, user.token, (await busyboxArchive()).archive);
    assert.equal((await deployAndWait(server, user.token, app.id)).status, 200);
    const dep = async (): Promise<{ live_build_id: string; config_pending: boolean; config_pending_keys: string[] }> =>
      (await server.request('GET', `/api/v1/deployments/${app.id}`, { token: user.token })).json;
    const liveBefore = (await dep()).live_build_id;

    const set = await cli(['env', 'set', '--app', app.subdomain, '--no-restart', 'FEATURE=on']);
    assert.equal(set.code, 0, set.stderr);
    assert.equal(set.stdout, `Set FEATURE on ${app.subdomain}.\nNot restarted: the change applies at the next deploy, restart or rollback (\`slipway restart ${app.subdomain}\`).\n`);
    assert.equal(set.stderr, '', 'no question without a terminal');
    assert.deepEqual([(await dep()).config_pending, (await dep()).config_pending_keys], [true, ['FEATURE']]);

    const env = await cli(['env', app.subdomain]);
    assert.equal(env.code, 0, env.stderr);
    assert.ok(env.stdout.endsWith(`\nPending: FEATURE changed; the app runs the old values until \`slipway restart ${app.subdomain}\`.\n`), env.stdout);
    const status = await cli(['status', app.subdomain]);
    assert.equal(status.code, 0, status.stderr);
    assert.match(status.stdout, new RegExp(`^pending: +FEATURE changed; the app runs the old values until \`slipway restart ${app.subdomain}\`$`, 'm'));
    const apps = await cli(['apps']);
    assert.equal(apps.code, 0, apps.stderr);
    assert.match(apps.stdout.split('\n').find((line) => line.includes(app.subdomain)) ?? '', /\srunning \(restart pending\)\s/, apps.stdout);

    const restart = await cli(['restart', app.subdomain]);
    assert.equal(restart.code, 0, restart.stderr);
    assert.deepEqual([(await dep()).config_pending, (await dep()).config_pending_keys], [false, []]);
    assert.equal((await dep()).live_build_id, liveBefore, 'a restart re-releases the same build');
    assert.doesNotMatch((await cli(['status', app.subdomain])).stdout, /^pending:/m);
    assert.doesNotMatch((await cli(['env', app.subdomain])).stdout, /Pending:/);
    assert.doesNotMatch((await cli(['apps'])).stdout, /restart pending/);

    // No terminal and no flag: nobody can be asked, so the CLI restarts (its default since Part two).
    const scripted = await cli(['env', 'set', '--app', app.subdomain, 'FEATURE=off']);
    assert.equal(scripted.code, 0, scripted.stderr);
    assert.match(scripted.stdout, new RegExp(`^Set FEATURE on ${app.subdomain}\\. Restarting ${app.subdomain}…\\nRestarted: `));
    assert.deepEqual([(await dep()).config_pending, (await dep()).config_pending_keys], [false, []]);
  });
});
