// End to end on the real engine: a build printing 30 MB keeps a capped log (head, marker, tail), served and followed.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { busyboxArchive, createArchiveApp } from '../helpers/apps.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const CAP = 64 * 1024;
const OUTPUT_BYTES = 30_000_000;

describe('build log cap', () => {
  let ts: TestServer;
  let token: string;
  before(async () => {
    // A small cap (the default is 5 MiB) keeps the assertions cheap; the output is the audit's 30 MB.
    ts = await startTestServer({ SLIPWAY_BUILD_LOG_MAX_BYTES: String(CAP) });
    token = (await ts.newUser('logcap')).token;
  });
  after(async () => {
    await ts.close();
  });

  test('a RUN step printing 30 MB leaves a log within the cap: first and last lines, and a marker; a follower gets the same', async () => {
    const app = await busyboxArchive({
      extraDockerfile: `RUN echo FIRST-OUTPUT-LINE && yes 0123456789abcdefghijklmnopqrstuvwxyz | head -c ${OUTPUT_BYTES} && echo && echo LAST-OUTPUT-LINE`,
    });
    const { id } = await createArchiveApp(ts, token, app.archive);
    const deploy = await ts.request('POST', `/api/v1/deployments/${id}/deploy`, { token });
    assert.equal(deploy.status, 202, deploy.text);
    const buildId = deploy.json.id as string;
    const logsPath = `/api/v1/deployments/${id}/builds/${buildId}/logs`;

    const followed = await ts.request('GET', `${logsPath}?follow=true`, { token });
    assert.equal(followed.status, 200);
    const build = (await ts.request('GET', `/api/v1/deployments/${id}/builds/${buildId}`, { token })).json;
    assert.equal(build.status, 'succeeded', build.error ?? '');

    const served = await ts.request('GET', logsPath, { token });
    const bytes = Buffer.byteLength(served.text);
    assert.ok(bytes <= CAP, `served ${bytes} bytes for a cap of ${CAP}`);
    assert.ok(served.text.startsWith(`==> build ${buildId}`), 'the first line is there');
    assert.match(served.text, /FIRST-OUTPUT-LINE/);
    assert.match(served.text, /LAST-OUTPUT-LINE/);
    assert.match(served.text, /==> live at build \S+\n$/, 'the last line is there');
    const marker = /^… (\d+) bytes of build output omitted …$/m.exec(served.text);
    assert.ok(marker, 'the marker is there');
    assert.ok(Number(marker[1]) >= OUTPUT_BYTES - CAP, `the marker counts ${marker[1]} bytes`);
    assert.equal(followed.text, served.text, 'the follower got the same log');

    const onDisk = fs.statSync(path.join(ts.dataDir, 'logs', id, `${buildId}.log`)).size;
    assert.ok(onDisk <= CAP, `${onDisk} bytes on disk`);
    assert.equal((await ts.request('DELETE', `/api/v1/deployments/${id}`, { token })).status, 204);
  });
});
