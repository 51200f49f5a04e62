// `npm test`: install what is missing, compile, bring up Docker, busybox and the stand-in images, run every test file.
import fs from 'node:fs';
import path from 'node:path';
import { root, run, ensureDependencies, compile, ensureDocker, ensureHaproxy, ensurePostgres, aptInstall } from './setup.mjs';
import { ensureStandInImages } from './stand-in-images.mjs';

await ensureDependencies();
compile();
await ensureDocker();
// The routing suites run against HAProxy as well as the Node plane.
ensureHaproxy();
if (!fs.existsSync('/bin/busybox')) aptInstall(['busybox-static']);
// The dashboard tests drive Debian's Chromium (playwright-core never downloads a browser here).
if (!fs.existsSync('/usr/bin/chromium')) aptInstall(['chromium']);
// The HTTPS suite runs a real ACME CA on loopback: Debian's pebble (it ships pebble-challtestsrv too).
if (!fs.existsSync('/usr/bin/pebble') || !fs.existsSync('/usr/bin/pebble-challtestsrv')) aptInstall(['pebble']);
// The swarm suite (test/swarm) runs three engines in network namespaces (scripts/swarm-cluster.mjs)
// with Debian's registry; containerd, dockerd and iproute2 come with the Docker setup above.
if (!fs.existsSync('/usr/bin/docker-registry')) aptInstall(['docker-registry']);
// `slipway server install`'s unit is checked with systemd-analyze verify (no running systemd needed).
if (!fs.existsSync('/usr/bin/systemd-analyze')) aptInstall(['systemd']);
// The database and build-base tests run the stand-in images (decisions §19): built from Debian's
// packages when missing or out of date, skipped in a second or so when up to date.
try {
  await ensureStandInImages();
} catch (err) {
  process.stderr.write(`[setup] ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
}

function findTests(dir) {
  const found = [];
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) found.push(...findTests(full));
    else if (entry.name.endsWith('.test.js')) found.push(full);
  }
  return found.sort();
}

const only = process.argv.slice(2);
const files = findTests(path.join(root, 'dist', 'test')).filter(
  (file) => only.length === 0 || only.some((pattern) => file.includes(pattern)),
);
// Compiled tests of sources deleted since the last build would run stale: only run ones with a .ts.
const live = files.filter((file) => {
  const rel = path.relative(path.join(root, 'dist'), file).replace(/\.js$/, '.ts');
  return fs.existsSync(path.join(root, rel));
});
// test/ha (several instances, decisions §15) needs PostgreSQL: it runs in the PostgreSQL pass only.
const onlyPostgres = (file) => path.relative(path.join(root, 'dist', 'test'), file).startsWith(`ha${path.sep}`);
// The longest files start first, so the run does not end on one of them alone (longest first
// shortens the whole run); the rest keep their order.
const SLOW_FIRST = ['swarm/swarm-runtime', 'e2e/recovery-at-scale', 'swarm/own-registry', 'swarm/swarm-nodes', 'e2e/crash-loop', 'dashboard/', 'e2e/recovery', 'upgrade/', 'operate/disaster', 'runtime/docker-engine.test', 'fuzz/', 'swarm/', 'ha/', 'e2e/'];
const rank = (file) => {
  const at = SLOW_FIRST.findIndex((fragment) => file.includes(`${path.sep}test${path.sep}${fragment}`));
  return at === -1 ? SLOW_FIRST.length : at;
};
const byDuration = (files) => files.map((file, at) => ({ file, at })).sort((a, b) => rank(a.file) - rank(b.file) || a.at - b.at).map(({ file }) => file);
// TAP on stdout (CI reads the counts), and on stderr at the end the slowest files and every failure with its file.
// The timeout bounds each test and each file as a whole: 10 min, so a slow file on a busy machine
// is not cut off while a hung one still ends the run in time.
const NODE_TEST = [
  '--test',
  '--test-concurrency=3',
  '--test-timeout=600000',
  '--test-reporter=tap',
  '--test-reporter-destination=stdout',
  `--test-reporter=${path.join(root, 'scripts', 'test-summary-reporter.mjs')}`,
  '--test-reporter-destination=stderr',
];
// Three files at a time: most of a file's time is spent waiting on the engine (builds, container starts), so
// a third one uses what two leave idle on a two-core machine.
const sqliteFiles = byDuration(live.filter((file) => !onlyPostgres(file)));
if (sqliteFiles.length > 0) {
  run(process.execPath, [...NODE_TEST, ...sqliteFiles], {
    env: { ...process.env, SLIPWAY_ALLOW_PRIVATE_GIT: 'true' },
  });
}

// The same dialect-neutral suites once more on PostgreSQL (the tests above run on SQLite).
const DIALECT_NEUTRAL = ['api/admin-users', 'api/teams', 'api/audit', 'api/two-factor', 'db/audit-atomicity', 'db/subdomain-claims', 'domain/custom-domain-store', 'db/instance-registry', 'db/upload-archives', 'deploy/coordination', 'tls/challenge-store', 'deploy/build-log-contract', 'deploy/build-queue-contract', 'api/instances', 'db/webhook-store', 'db/list-version', 'api/list-cache', 'api/deployments', 'api/api-keys', 'api/pagination', 'api/env', 'api/domains', 'api/isolation', 'api/webhooks', 'api/webhook-replays', 'api/previews', 'api/quotas', 'api/session-cookie', 'api/dashboard', 'e2e/archive-lifecycle', 'e2e/router', 'cli/reset-password', 'api/client-aborts', 'e2e/server-restarts', 'db/managed-database-store', 'api/databases', 'db/notification-store', 'db/schema-version', 'upgrade/upgrade', 'operate/self-backup-store'];
const neutral = byDuration(live).filter((file) => onlyPostgres(file) || DIALECT_NEUTRAL.some((name) => file.endsWith(`${name}.test.js`)));
if (neutral.length > 0) {
  const databaseUrl = await ensurePostgres();
  if (databaseUrl !== null) {
    process.stderr.write(`[setup] running ${neutral.length} suites again on PostgreSQL\n`);
    run(process.execPath, [...NODE_TEST, ...neutral], {
      env: { ...process.env, SLIPWAY_ALLOW_PRIVATE_GIT: 'true', SLIPWAY_TEST_DATABASE_URL: databaseUrl },
    });
  }
}
