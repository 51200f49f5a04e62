// Benchmark (a repetition, not a test): `deploy?wait=true` on an instance just after the other one was killed, N times (issue 33).
// Run: SLIPWAY_TEST_DATABASE_URL=postgres://… node dist/bench/ha-kill.js [--runs 20]
//
// Two instances on one PostgreSQL, one archive app. Each run: a deploy through instance 1 (its build
// may be running there), kill -9 of instance 1 after a random 0–1.5 s, then at once
// `POST /deploy?wait=true` through instance 0, over a connection of its own. It counts the answers
// by status, and the requests closed with no answer at all, with what instance 0 logged meanwhile.
import http from 'node:http';
import { parseArgs } from 'node:util';
import { busyboxArchive, createArchiveApp, deployAndWait } from '../test/helpers/apps.js';
import { startCluster, type Instance } from '../test/helpers/instances.js';
import { dropClusterDatabase, testDatabase } from '../test/helpers/server.js';

const { values } = parseArgs({ options: { runs: { type: 'string', default: '20' }, 'no-build': { type: 'boolean', default: false } } });
const runs = Number(values.runs);
/** A git app whose repository refuses connections: every deploy fails at once, with no engine work (for an engine out of networks). */
const noBuild = values['no-build'] === true;
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** POST with no body over a fresh connection: the status and body, or the socket error when it closed with no answer. */
function post(instance: Instance, urlPath: string, token: string): Promise<{ status: number; text: string } | { error: string }> {
  return new Promise((resolve) => {
    const req = http.request({ host: '127.0.0.1', port: instance.port, method: 'POST', path: urlPath, agent: false, headers: { authorization: `Bearer ${token}` } });
    req.on('error', (err: NodeJS.ErrnoException) => resolve({ error: `${err.code ?? ''} ${err.message}` }));
    req.on('response', (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      res.on('error', (err) => resolve({ error: `response cut: ${err.message}` }));
    });
    req.end();
  });
}

async function main(): Promise<void> {
  const database = await testDatabase();
  if (database === undefined) throw new Error('set SLIPWAY_TEST_DATABASE_URL');
  const cluster = await startCluster(database.url, 2);
  try {
    const [a, b] = cluster.instances as [Instance, Instance];
    const token = cluster.adminToken;
    let app: { id: string };
    if (noBuild) {
      const created = await a.request('POST', '/api/v1/deployments', { token, body: { name: 'ha-kill', subdomain: `ha-kill-${process.pid}`, repo_url: 'http://127.0.0.1:9/none.git', branch: 'main' } });
      if (created.status !== 201) throw new Error(`create: ${created.status} ${created.text}`);
      app = created.json as { id: string };
    } else {
      const built = await busyboxArchive({ body: 'ha kill\n' });
      app = await createArchiveApp(a, token, built.archive);
      const first = await deployAndWait(a, token, app.id);
      if (first.status !== 200) throw new Error(`first deploy: ${first.status} ${first.text}`);
    }
    const outcomes = new Map<string, number>();
    for (let run = 1; run <= runs; run++) {
      const logStart = a.process?.output().length ?? 0;
      await b.request('POST', `/api/v1/deployments/${app.id}/deploy`, { token }).catch(() => undefined);
      await sleep(Math.random() * 1500);
      await cluster.kill(b);
      const started = Date.now();
      const answer = await post(a, `/api/v1/deployments/${app.id}/deploy?wait=true`, token);
      const seconds = ((Date.now() - started) / 1000).toFixed(1);
      const key = 'error' in answer ? `no answer (${answer.error})` : String(answer.status);
      outcomes.set(key, (outcomes.get(key) ?? 0) + 1);
      console.log(`run ${run}: ${key} after ${seconds} s${'text' in answer && answer.status !== 200 ? ` ${answer.text.slice(0, 200)}` : ''}`);
      if ('error' in answer || (answer.status >= 500 && !noBuild)) console.log(`instance 0 logged:\n${(a.process?.output() ?? '').slice(logStart)}`);
      await cluster.start(b);
    }
    console.log(`${runs} runs: ${[...outcomes].map(([k, n]) => `${n} × ${k}`).join(', ')}`);
  } finally {
    await cluster.close();
    await dropClusterDatabase(database);
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
