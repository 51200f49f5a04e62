// Benchmark: point-in-time recovery of a managed PostgreSQL (decisions §20) — seconds from a commit to its write-ahead log being in the destination, and seconds of a restore {at, into}.
// Run: node dist/bench/pitr.js [--scale 10] [--samples 5] [--round-seconds 20]
//      (a local destination; pgbench -i -s SCALE fills the database first: scale 10 is about 160 MB)
import { parseArgs } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { STAND_IN_IMAGES, databaseContainer, runIn, waitForStatus } from '../test/helpers/databases.js';
import { startTestServer } from '../test/helpers/server.js';
import { createDockerEngine } from '../src/runtime/docker/docker-engine.js';

const { values } = parseArgs({
  options: {
    scale: { type: 'string', default: '10' },
    samples: { type: 'string', default: '5' },
    'round-seconds': { type: 'string', default: '20' },
  },
});

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;

async function main(): Promise<void> {
  const s = await startTestServer({ ...STAND_IN_IMAGES, SLIPWAY_PITR_ROUND_SECONDS: values['round-seconds']! });
  try {
    const user = await s.newUser('bench');
    const token = user.token;
    const destination = (await s.request('POST', '/api/v1/backup-destinations', { token, body: { name: 'here', type: 'local' } })).json.id;
    const db = (await s.request('POST', '/api/v1/databases', { token, body: { name: 'bench-pitr', engine: 'postgres', memory_mb: 1024 } })).json.id;
    await waitForStatus(s, token, db);
    const creds = (await s.request('GET', `/api/v1/databases/${db}/credentials`, { token })).json;
    const container = (await databaseContainer(db))!.Id;
    const env = { PGPASSWORD: creds.password };
    const sql = (statement: string) => runIn(container, ['psql', '-h', '127.0.0.1', '-U', creds.username, '-d', creds.database, '-Atc', statement], env);
    let t = Date.now();
    // The fill takes minutes at large scales: beyond runIn's 30 s.
    const fill = await createDockerEngine().execInContainer!(container, ['pgbench', '-i', '-q', '-s', values.scale!, '-h', '127.0.0.1', '-U', creds.username, creds.database], { env, timeoutMs: 3_600_000 });
    if (fill.exitCode !== 0) throw new Error(`pgbench exited with ${fill.exitCode}: ${fill.output}`);
    const size = (await sql(`select pg_size_pretty(pg_database_size(current_database()))`)).trim();
    console.log(`pgbench -i -s ${values.scale}: ${size} in ${((Date.now() - t) / 1000).toFixed(1)} s`);

    t = Date.now();
    await s.request('PATCH', `/api/v1/databases/${db}`, { token, body: { backup: { schedule: '0 3 * * *', destination_id: destination, pitr: true } } });
    const windowOf = async () => (await s.request('GET', `/api/v1/databases/${db}/recovery-window`, { token })).json;
    while ((await windowOf()).from === null) await sleep(200);
    console.log(`pitr on → first base backup and archived log: ${((Date.now() - t) / 1000).toFixed(1)} s`);

    // A commit, then the time until the window's end passes it: its log is in the destination.
    const lags: number[] = [];
    await sql('create table bench_marks (at timestamptz default now())');
    for (let i = 0; i < Number(values.samples); i++) {
      await sleep(Math.random() * 5000);
      await sql('insert into bench_marks default values');
      const committed = Date.now();
      while (Date.parse((await windowOf()).until ?? '0') < committed) await sleep(200);
      lags.push((Date.now() - committed) / 1000);
    }
    console.log(`commit → in the destination: ${lags.map((l) => l.toFixed(1)).join(', ')} s (median ${median(lags).toFixed(1)} s, max ${Math.max(...lags).toFixed(1)} s; goal < 60 s)`);

    const at = new Date().toISOString();
    await sql('insert into bench_marks default values');
    while (((await windowOf()).until ?? '') < at) await sleep(200);
    t = Date.now();
    const started = await s.request('POST', `/api/v1/databases/${db}/restore`, { token, body: { at, into: 'bench-pitr-then' } });
    if (started.status !== 202) throw new Error(started.text);
    for (;;) {
      const r = (await s.request('GET', `/api/v1/databases/${db}/restores/${started.json.id}`, { token })).json;
      if (r.status === 'failed') throw new Error(r.error);
      if (r.status === 'succeeded') break;
      await sleep(500);
    }
    console.log(`restore {at, into} of ${size}: ${((Date.now() - t) / 1000).toFixed(1)} s (a new database created, the base backup laid, the log replayed, promoted, started)`);
  } finally {
    await s.close();
  }
}

await main();
