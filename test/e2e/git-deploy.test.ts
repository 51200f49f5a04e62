// End to end with a real git server: git deploys, branches, nested Dockerfiles, and hostile repo values.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import crypto from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import Database from 'better-sqlite3';
import { appRequest, deployAndWait, testEngine, uniqueSubdomain } from '../helpers/apps.js';
import { ensureBusyboxImage, BUSYBOX_IMAGE } from '../helpers/busybox-image.js';
import { startGitServer, type GitServer } from '../helpers/git-server.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

function appFiles(body: string, dockerfilePath = 'Dockerfile'): Record<string, string> {
  const dockerfile = [
    `FROM ${BUSYBOX_IMAGE}`,
    'COPY site/index.html /www/index.html',
    'EXPOSE 8080',
    'CMD ["/bin/sh", "-c", "exec httpd -f -p $PORT -h /www"]',
    '',
  ].join('\n');
  return { [dockerfilePath]: dockerfile, 'site/index.html': body };
}

describe('git deployments', () => {
  let ts: TestServer;
  let git: GitServer;
  let token: string;

  before(async () => {
    await ensureBusyboxImage(testEngine());
    git = await startGitServer();
    ts = await startTestServer();
    token = (await ts.newUser('git')).token;
  });
  after(async () => {
    await ts.close();
    await git.close();
  });

  test('a branch with a nested dockerfile_path is built at the branch head and served; redeploy picks the new head', async () => {
    const repo = await git.createRepo(`app-${crypto.randomUUID()}`, appFiles('main branch\n', 'deploy/web/Dockerfile'));
    const featureSha = await git.commit(path.basename(new URL(repo.url).pathname, '.git'), appFiles('feature v1\n', 'deploy/web/Dockerfile'), {
      branch: 'feature/x',
    });
    const subdomain = uniqueSubdomain('git');
    const created = await ts.request('POST', '/api/v1/deployments', {
      token,
      body: { name: 'git app', subdomain, repo_url: repo.url, branch: 'feature/x', dockerfile_path: 'deploy/web/Dockerfile' },
    });
    assert.equal(created.status, 201, created.text);
    assert.equal(created.json.repo_url, repo.url);
    assert.equal(created.json.branch, 'feature/x');
    assert.equal(created.json.dockerfile_path, 'deploy/web/Dockerfile');
    assert.equal(created.json.status, 'pending');

    const trigger = await ts.request('POST', `/api/v1/deployments/${created.json.id}/deploy`, { token });
    assert.equal(trigger.status, 202);
    assert.equal(trigger.json.commit_sha, featureSha);
    const done = await deployAndWait(ts, token, created.json.id);
    assert.equal(done.status, 200, done.text);
    assert.equal(done.json.commit_sha, featureSha);
    assert.equal((await appRequest(ts.port, subdomain)).body, 'feature v1\n');

    const newer = await git.commit(path.basename(new URL(repo.url).pathname, '.git'), appFiles('feature v2\n', 'deploy/web/Dockerfile'), {
      branch: 'feature/x',
    });
    const again = await deployAndWait(ts, token, created.json.id);
    assert.equal(again.status, 200, again.text);
    assert.equal(again.json.commit_sha, newer);
    assert.equal((await appRequest(ts.port, subdomain)).body, 'feature v2\n');
  });

  test('without a branch the remote default branch is used', async () => {
    const repo = await git.createRepo(`default-${crypto.randomUUID()}`, appFiles('default branch\n'), { branch: 'trunk' });
    const subdomain = uniqueSubdomain('git');
    const created = await ts.request('POST', '/api/v1/deployments', { token, body: { name: 'default', subdomain, repo_url: repo.url } });
    assert.equal(created.status, 201, created.text);
    const done = await deployAndWait(ts, token, created.json.id);
    assert.equal(done.status, 200, done.text);
    assert.equal(done.json.commit_sha, repo.sha);
    assert.equal((await appRequest(ts.port, subdomain)).body, 'default branch\n');
  });

  test('an unknown branch is refused at deploy time and changes nothing', async () => {
    const repo = await git.createRepo(`nobranch-${crypto.randomUUID()}`, appFiles('x\n'));
    const created = await ts.request('POST', '/api/v1/deployments', {
      token,
      body: { name: 'nb', subdomain: uniqueSubdomain('git'), repo_url: repo.url, branch: 'does-not-exist' },
    });
    assert.equal(created.status, 201);
    const res = await ts.request('POST', `/api/v1/deployments/${created.json.id}/deploy`, { token });
    assert.equal(res.status, 400);
    assert.equal(res.json.error, 'validation_error');
    assert.match(res.json.message, /does-not-exist/);
    const builds = await ts.request('GET', `/api/v1/deployments/${created.json.id}/builds`, { token });
    assert.deepEqual(builds.json, []);
    assert.equal((await ts.request('GET', `/api/v1/deployments/${created.json.id}`, { token })).json.status, 'pending');
  });

  test('an unreachable repository gives a build record that fails with the reason', async () => {
    const created = await ts.request('POST', '/api/v1/deployments', {
      token,
      body: { name: 'gone', subdomain: uniqueSubdomain('git'), repo_url: 'http://127.0.0.1:1/nothing.git' },
    });
    assert.equal(created.status, 201, created.text);
    const trigger = await ts.request('POST', `/api/v1/deployments/${created.json.id}/deploy`, { token });
    assert.equal(trigger.status, 202, trigger.text);
    assert.equal(trigger.json.status, 'building');
    assert.equal(trigger.json.finished_at, null);
    const waited = await ts.request('POST', `/api/v1/deployments/${created.json.id}/deploy?wait=true`, { token });
    assert.equal(waited.status, 500);
    assert.equal(waited.json.error, 'build_failed');
    assert.match(waited.json.message, /cannot read the repository/);
    const builds = (await ts.request('GET', `/api/v1/deployments/${created.json.id}/builds`, { token })).json;
    assert.equal(builds.length, 2);
    assert.ok(builds.every((b: { status: string }) => b.status === 'failed' || b.status === 'cancelled'), JSON.stringify(builds));
    assert.equal((await ts.request('GET', `/api/v1/deployments/${created.json.id}`, { token })).json.status, 'failed');
  });

  test('hostile repo URLs and branches are refused at create time', async () => {
    const sentinel = `/tmp/slipway-pwned-${crypto.randomUUID()}`;
    const urls = [
      `--upload-pack=touch ${sentinel}`,
      `ext::sh -c touch% ${sentinel}`,
      `https://example.com/$(touch ${sentinel})`,
      `https://example.com/repo.git;touch ${sentinel}`,
      `https://example.com/repo.git\ntouch ${sentinel}`,
      `-oProxyCommand=touch ${sentinel}`,
    ];
    for (const repo_url of urls) {
      const res = await ts.request('POST', '/api/v1/deployments', { token, body: { name: 'x', subdomain: uniqueSubdomain('bad'), repo_url } });
      assert.equal(res.status, 400, repo_url);
      assert.equal(res.json.error, 'validation_error');
    }
    const repo = await git.createRepo(`inj-${crypto.randomUUID()}`, appFiles('x\n'));
    for (const branch of [`--upload-pack=touch ${sentinel}`, `$(touch ${sentinel})`, `main;touch ${sentinel}`, `main\ntouch`, '-x']) {
      const res = await ts.request('POST', '/api/v1/deployments', { token, body: { name: 'x', subdomain: uniqueSubdomain('bad'), repo_url: repo.url, branch } });
      assert.equal(res.status, 400, branch);
      assert.equal(res.json.error, 'validation_error');
    }
    assert.equal(fs.existsSync(sentinel), false);
  });

  test('hostile values stored in the database never reach a shell or an option position', async () => {
    const sentinel = `/tmp/slipway-pwned-${crypto.randomUUID()}`;
    const repo = await git.createRepo(`stored-${crypto.randomUUID()}`, appFiles('x\n'));
    const created = await ts.request('POST', '/api/v1/deployments', { token, body: { name: 'stored', subdomain: uniqueSubdomain('git'), repo_url: repo.url } });
    assert.equal(created.status, 201);
    const sqlite = new Database(path.join(ts.dataDir, 'slipway.db'));
    try {
      const hostile: Array<[string, string | null]> = [
        [`--upload-pack=touch ${sentinel}`, null],
        [repo.url, `--upload-pack=touch ${sentinel}`],
        [repo.url, `$(touch ${sentinel})`],
        [`ext::sh -c touch% ${sentinel}`, null],
      ];
      for (const [url, branch] of hostile) {
        sqlite.prepare('update deployments set repo_url = ?, branch = ? where id = ?').run(url, branch, created.json.id);
        const res = await ts.request('POST', `/api/v1/deployments/${created.json.id}/deploy?wait=true`, { token });
        assert.ok(res.status === 400 || res.status === 500, `${url} ${branch}: ${res.status}`);
        assert.equal(fs.existsSync(sentinel), false);
      }
    } finally {
      sqlite.close();
    }
  });
});
