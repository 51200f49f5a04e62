// Benchmark (issue 27): seconds from a signed pull request event to its preview serving the head, against a signed push deploying the same commit. Run: node dist/bench/previews.js [--runs 6]
import crypto from 'node:crypto';
import { appRequest, testEngine } from '../test/helpers/apps.js';
import { BUSYBOX_IMAGE, ensureBusyboxImage } from '../test/helpers/busybox-image.js';
import { startGitServer } from '../test/helpers/git-server.js';
import { pullRequestBody, pullRequestHeaders } from '../test/helpers/pull-requests.js';
import { startTestServer } from '../test/helpers/server.js';

const arg = (name: string, fallback: string): string => {
  const index = process.argv.indexOf(name);
  return index === -1 ? fallback : (process.argv[index + 1] ?? fallback);
};
const runs = Number(arg('--runs', '6'));

function appFiles(body: string): Record<string, string> {
  const dockerfile = [`FROM ${BUSYBOX_IMAGE}`, 'COPY index.html /www/index.html', 'EXPOSE 8080', 'CMD ["/bin/sh", "-c", "exec httpd -f -p $PORT -h /www"]', ''].join('\n');
  return { Dockerfile: dockerfile, 'index.html': body };
}

/** Seconds until `subdomain` answers 200 with `body` through the router, polled every 25 ms (10 min at most). */
async function servedAfter(port: number, subdomain: string, body: string, started: number): Promise<number> {
  const deadline = Date.now() + 600_000;
  for (;;) {
    const res = await appRequest(port, subdomain, { timeoutMs: 5_000 }).catch(() => undefined);
    if (res?.status === 200 && res.body === body) return (performance.now() - started) / 1000;
    if (Date.now() > deadline) throw new Error(`${subdomain} never served the commit`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[mid] ?? 0) : ((sorted[mid - 1] ?? 0) + (sorted[mid] ?? 0)) / 2;
};

await ensureBusyboxImage(testEngine());
const git = await startGitServer();
const ts = await startTestServer();
const results: Array<{ first: 'push' | 'preview'; push: number; preview: number }> = [];
try {
  const { token } = await ts.newUser('bench-previews');
  for (let run = 0; run < runs; run += 1) {
    const repo = `bench-${crypto.randomUUID()}`;
    const { url } = await git.createRepo(repo, appFiles('base\n'));
    const subdomain = `bp${crypto.randomBytes(4).toString('hex')}`;
    const created = await ts.request('POST', '/api/v1/deployments', { token, body: { name: repo, subdomain, repo_url: url, branch: 'main', auto_deploy: true, previews: true } });
    if (created.status !== 201) throw new Error(created.text);
    const id = created.json.id as string;
    const secret = (await ts.request('POST', `/api/v1/deployments/${id}/webhook`, { token })).json.secret as string;

    // One commit, new content every run (no cached layer from an earlier run): the pull request's head, then pushed to main as is.
    const body = `run ${run} ${crypto.randomUUID()}\n`;
    const sha = await git.commit(repo, appFiles(body), { branch: 'feature' });
    await git.setRef(repo, 'refs/pull/1/head');

    const deliverPush = async (): Promise<number> => {
      const raw = Buffer.from(JSON.stringify({ ref: 'refs/heads/main', before: '0'.repeat(40), after: sha, repository: { full_name: 'owner/app' } }));
      const headers = {
        'content-type': 'application/json',
        'x-github-event': 'push',
        'x-github-delivery': crypto.randomUUID(),
        'x-hub-signature-256': `sha256=${crypto.createHmac('sha256', secret).update(raw).digest('hex')}`,
      };
      const started = performance.now();
      const res = await ts.request('POST', `/api/v1/hooks/${id}`, { raw, headers });
      if (res.status !== 202) throw new Error(`push: ${res.status} ${res.text}`);
      return servedAfter(ts.port, subdomain, body, started);
    };
    const deliverPullRequest = async (): Promise<number> => {
      const raw = pullRequestBody('github', { action: 'opened', number: 1, headSha: sha, headBranch: 'feature' });
      const started = performance.now();
      const res = await ts.request('POST', `/api/v1/hooks/${id}`, { raw, headers: pullRequestHeaders('github', secret, raw) });
      if (res.status !== 202) throw new Error(`pull request: ${res.status} ${res.text}`);
      return servedAfter(ts.port, `${subdomain}-pr-1`, body, started);
    };
    // The push needs its commit on main (a fast-forward to the pull request's head, as a merge without a merge commit).
    await git.setRef(repo, 'refs/heads/main');

    // Which goes first alternates: the second build of a commit finds its layers cached.
    const first = run % 2 === 0 ? 'push' : 'preview';
    let pushSeconds: number;
    let previewSeconds: number;
    if (first === 'push') {
      pushSeconds = await deliverPush();
      previewSeconds = await deliverPullRequest();
    } else {
      previewSeconds = await deliverPullRequest();
      pushSeconds = await deliverPush();
    }
    results.push({ first, push: pushSeconds, preview: previewSeconds });
    console.log(`run ${run + 1}: ${first} first — push ${pushSeconds.toFixed(2)} s, preview ${previewSeconds.toFixed(2)} s`);
    await ts.request('DELETE', `/api/v1/deployments/${id}`, { token });
  }
} finally {
  await ts.close();
  await git.close();
}

const cold = { push: results.filter((r) => r.first === 'push').map((r) => r.push), preview: results.filter((r) => r.first === 'preview').map((r) => r.preview) };
const warm = { push: results.filter((r) => r.first === 'preview').map((r) => r.push), preview: results.filter((r) => r.first === 'push').map((r) => r.preview) };
const all = { push: results.map((r) => r.push), preview: results.map((r) => r.preview) };
const row = (label: string, set: { push: number[]; preview: number[] }): string =>
  `${label}: push ${median(set.push).toFixed(2)} s, preview ${median(set.preview).toFixed(2)} s, ratio ×${(median(set.preview) / median(set.push)).toFixed(2)}`;
console.log(row('cold (first build of the commit)', cold));
console.log(row('warm (layers cached)', warm));
console.log(row('all runs', all));
console.log('goal: preview/push ≤ 1.1');
