// End to end on the real engine (issue 23 item 9, as the attack): an app that crashes at start is reported with its first run's last line, its output in the order it was written, even when the engine restarts it before the report is made.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { busyboxScriptArchive, createArchiveApp, deployAndWait } from '../helpers/apps.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/**
 * A crashing app: it counts its runs in a file of its container (kept across the engine's
 * restarts), writes stdout and stderr lines in turn, and ends with a stderr line naming the run.
 * `waitMs`: how long it sleeps before crashing (0: at once).
 */
async function crashingApp(waitSeconds: number): Promise<Buffer> {
  const lines: string[] = [];
  for (let i = 1; i <= 5; i += 1) lines.push(`echo "out ${i} of run $n"`, `echo "err ${i} of run $n" >&2`);
  const script = [
    'mkdir -p /tmp; n=$(cat /tmp/runs 2>/dev/null || echo 0); n=$((n+1)); echo $n > /tmp/runs',
    ...(waitSeconds > 0 ? [`sleep ${waitSeconds}`] : []),
    ...lines,
    'echo "fatal: cannot start (run $n)" >&2',
    'exit 3',
  ].join('; ');
  return busyboxScriptArchive(script);
}

describe('a crashing app is reported from its first run', () => {
  let ts: TestServer;
  let token: string;

  before(async () => {
    ts = await startTestServer();
    token = (await ts.newUser('crash')).token;
  });
  after(async () => {
    await ts.close();
  });

  for (const waitSeconds of [0, 1]) {
    test(`crashing ${waitSeconds === 0 ? 'at once' : 'after a second'}: the error ends with run 1's last line; the log has run 1's output in order, and no other run`, async () => {
      const { id } = await createArchiveApp(ts, token, await crashingApp(waitSeconds));
      const res = await deployAndWait(ts, token, id);
      assert.equal(res.status, 500, res.text);
      assert.equal(res.json.error, 'build_failed');
      assert.match(res.json.message, /exited with code 3/);
      const [build] = (await ts.request('GET', `/api/v1/deployments/${id}/builds`, { token })).json as Array<{ id: string; status: string; error: string }>;
      assert.equal(build?.status, 'failed');

      const log = (await ts.request('GET', `/api/v1/deployments/${id}/builds/${build?.id}/logs`, { token })).text;
      const appLines = log.split('\n').filter((line) => /^(out|err) \d of run|^fatal:/.test(line));
      // Run 1 only, every line once. The engine reads stdout and stderr through two pipes: each
      // stream keeps its order, their interleaving within one instant is lost (decisions).
      assert.deepEqual(appLines.filter((line) => line.startsWith('out')), [1, 2, 3, 4, 5].map((i) => `out ${i} of run 1`), log);
      assert.deepEqual(appLines.filter((line) => !line.startsWith('out')), [...[1, 2, 3, 4, 5].map((i) => `err ${i} of run 1`), 'fatal: cannot start (run 1)'], log);
      assert.match(res.json.message, /its last line: fatal: cannot start \(run 1\)$/);
      assert.match(String(build?.error), /its last line: fatal: cannot start \(run 1\)$/);
    });
  }

  test('a stdout line written after the stderr ones is the last line', async () => {
    const archive = await busyboxScriptArchive('echo "warning: on stderr" >&2; sleep 1; echo "bye from stdout"; exit 4');
    const { id } = await createArchiveApp(ts, token, archive);
    const res = await deployAndWait(ts, token, id);
    assert.equal(res.status, 500, res.text);
    assert.match(res.json.message, /exited with code 4 .*its last line: bye from stdout$/);
  });
});
