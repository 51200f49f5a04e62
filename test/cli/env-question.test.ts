// `slipway env set` on a terminal (issue 33 item 2): for a running app it asks "Restart … now to apply it? [Y/n]", as the dashboard's bar does; "n" leaves the change pending, Enter restarts.
import assert from 'node:assert/strict';
import fsp from 'node:fs/promises';
import { PassThrough } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import { buildProgram, runProgram } from '../../src/cli/main.js';
import type { CliIo } from '../../src/cli/cli-io.js';
import { busyboxArchive, createArchiveApp, deployAndWait, tempDir } from '../helpers/apps.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/** Runs the CLI in-process on a terminal-like stdin: `answer` is typed once the question is on screen. */
async function onTerminal(server: TestServer, apiKey: string, home: string, argv: string[], answer: string): Promise<{ code: number; stdout: string; stderr: string }> {
  const stdin = Object.assign(new PassThrough(), { isTTY: true, setRawMode: () => undefined });
  let stdout = '';
  let stderr = '';
  const out = new PassThrough();
  out.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  const err = new PassThrough();
  err.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
    // The person reads the question, then types.
    if (stderr.includes('[Y/n] ') && !stdin.writableEnded) stdin.end(answer);
  });
  const io: CliIo = { stdout: out, stderr: err, stdin, env: { url: server.url, apiKey, configDir: home }, cwd: home, onInterrupt: () => () => undefined };
  const code = await runProgram(buildProgram(io), ['node', 'slipway', ...argv], io);
  return { code, stdout, stderr };
}

describe('slipway env set on a terminal', () => {
  let server: TestServer;
  let user: Awaited<ReturnType<TestServer['newUser']>>;
  let home: string;

  before(async () => {
    server = await startTestServer();
    user = await server.newUser('envask');
    home = tempDir('env-question');
  });
  after(async () => {
    await server.close();
    await fsp.rm(home, { recursive: true, force: true });
  });

  test('asks before restarting a running app: "n" leaves it pending, Enter restarts it', async () => {
    const app = await createArchiveApp(server, user.token, (await busyboxArchive()).archive);
    assert.equal((await deployAndWait(server, user.token, app.id)).status, 200);
    const pending = async (): Promise<boolean> => (await server.request('GET', `/api/v1/deployments/${app.id}`, { token: user.token })).json.config_pending;

    const no = await onTerminal(server, user.apiKey, home, ['env', 'set', '--app', app.subdomain, 'ASKED=1'], 'n\n');
    assert.equal(no.code, 0, no.stderr);
    assert.match(no.stderr, new RegExp(`Set ASKED on ${app.subdomain}\\. Restart ${app.subdomain} now to apply it\\? \\[Y/n\\] `));
    assert.equal(no.stdout, `Set ASKED on ${app.subdomain}.\nPending: ${app.subdomain} runs the old values until it restarts (\`slipway restart ${app.subdomain}\`, or --restart with the change).\n`);
    assert.equal(await pending(), true);

    const yes = await onTerminal(server, user.apiKey, home, ['env', 'set', '--app', app.subdomain, 'ASKED=2'], '\n');
    assert.equal(yes.code, 0, yes.stderr);
    assert.match(yes.stdout, new RegExp(`Set ASKED on ${app.subdomain}\\. Restarting ${app.subdomain}…\\nRestarted: deployment ${app.subdomain} restarted \\(build [0-9a-f-]{36}\\)\\.\\n$`));
    assert.equal(await pending(), false, 'the restart applied it');
  });
});
