// Set-up shared by `npm start` and `npm test`: install what is missing, compile, bring up Docker.
// Plain Node (no dependencies), because it runs before `npm install`.
import { spawnSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { createHash } from 'node:crypto';
import { fileURLToPath } from 'node:url';

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

function log(message) {
  process.stderr.write(`[setup] ${message}\n`);
}

/** Runs a program with an argv array (never a shell); exits the process when it fails. */
export function run(cmd, args, options = {}) {
  const result = spawnSync(cmd, args, { stdio: 'inherit', cwd: root, ...options });
  if (result.status !== 0) {
    log(`${[cmd, ...args.slice(0, 4)].join(' ')}${args.length > 4 ? ` … (${args.length - 4} more arguments)` : ''} failed (exit ${result.status ?? result.signal})`);
    process.exit(result.status ?? 1);
  }
}

function mtime(file) {
  try {
    return fs.statSync(file).mtimeMs;
  } catch {
    return 0;
  }
}

/**
 * `npm install` when node_modules is missing or older than package.json / package-lock.json. The
 * first install is the slow part of a first start (better-sqlite3 compiles SQLite from source when
 * no prebuilt binary fits): say so, and show that it is still going.
 */
export async function ensureDependencies() {
  const stamp = path.join(root, 'node_modules', '.package-lock.json');
  const newest = Math.max(mtime(path.join(root, 'package.json')), mtime(path.join(root, 'package-lock.json')));
  if (mtime(stamp) >= newest && mtime(stamp) > 0) return;
  const first = !fs.existsSync(path.join(root, 'node_modules'));
  log(first
    ? 'installing dependencies (npm install). The first time takes 1 to 4 minutes, most of it compiling better-sqlite3 (SQLite) from source; later starts skip this.'
    : 'package.json changed: updating dependencies (npm install)…');
  const started = Date.now();
  const child = spawn('npm', ['install', '--no-audit', '--no-fund', '--loglevel=error'], { stdio: 'inherit', cwd: root });
  const ticker = setInterval(() => log(`still installing dependencies (${elapsed(started)} so far)…`), 30_000);
  const code = await new Promise((resolve) => {
    child.once('error', (err) => { log(`cannot run npm: ${err.message}`); resolve(1); });
    child.once('close', (status, signal) => resolve(status ?? signal));
  });
  clearInterval(ticker);
  if (code !== 0) {
    log(`npm install failed (exit ${code}); fix the error above and start again`);
    process.exit(typeof code === 'number' ? code : 1);
  }
  log(`dependencies installed in ${elapsed(started)}`);
}

function elapsed(since) {
  const s = Math.round((Date.now() - since) / 1000);
  return s < 60 ? `${s} s` : `${Math.floor(s / 60)} min ${s % 60} s`;
}

/**
 * A fingerprint of what the compiler reads: every file under the folders tsconfig.json includes
 * (path, size, modification time), tsconfig.json itself and package-lock.json (type packages).
 */
export function sourcesStamp(projectRoot = root) {
  const config = JSON.parse(fs.readFileSync(path.join(projectRoot, 'tsconfig.json'), 'utf8'));
  const dirs = [...new Set((config.include ?? []).map((pattern) => pattern.split('/')[0]).filter((d) => d && !d.includes('*')))];
  const entries = [];
  const visit = (rel) => {
    const full = path.join(projectRoot, rel);
    let stat;
    try { stat = fs.statSync(full); } catch { return; }
    if (stat.isDirectory()) {
      for (const name of fs.readdirSync(full).sort()) visit(path.join(rel, name));
    } else {
      entries.push(`${rel}\0${stat.size}\0${stat.mtimeMs}`);
    }
  };
  for (const rel of ['tsconfig.json', 'package-lock.json', ...dirs]) visit(rel);
  return createHash('sha256').update(entries.join('\n')).digest('hex');
}

/**
 * Compiles the TypeScript sources into dist/ when they changed since the last compile (a stamp of
 * their names, sizes and times in dist/.sources-stamp); a start with nothing changed skips tsc.
 * @returns 'compiled' or 'up to date'.
 */
export function compile(projectRoot = root) {
  const stampFile = path.join(projectRoot, 'dist', '.sources-stamp');
  const stamp = sourcesStamp(projectRoot);
  let previous = '';
  try { previous = fs.readFileSync(stampFile, 'utf8'); } catch { /* never compiled */ }
  if (previous === stamp) {
    log('compiled output is up to date (no source changed since the last compile)');
    return 'up to date';
  }
  log('compiling TypeScript…');
  const started = Date.now();
  run(process.execPath, [path.join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', path.join(projectRoot, 'tsconfig.json')], { cwd: projectRoot });
  fs.mkdirSync(path.dirname(stampFile), { recursive: true });
  fs.writeFileSync(stampFile, stamp);
  log(`compiled in ${elapsed(started)}`);
  return 'compiled';
}

function socketPath() {
  const host = process.env.DOCKER_HOST;
  if (host === undefined || host === '') return '/var/run/docker.sock';
  if (host.startsWith('unix://')) return host.slice('unix://'.length);
  return null; // tcp:// engines are not ours to start
}

function pingDocker(timeoutMs = 2000) {
  const socket = socketPath();
  if (socket === null) return Promise.resolve(true);
  return new Promise((resolve) => {
    const req = http.get({ socketPath: socket, path: '/_ping', timeout: timeoutMs }, (res) => {
      res.resume();
      resolve(res.statusCode === 200);
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(false));
  });
}

function which(cmd) {
  for (const dir of (process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin').split(':')) {
    const candidate = path.join(dir, cmd);
    try {
      fs.accessSync(candidate, fs.constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  for (const dir of ['/usr/sbin', '/usr/bin', '/sbin', '/bin']) {
    if (fs.existsSync(path.join(dir, cmd))) return path.join(dir, cmd);
  }
  return null;
}

const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;

/** Installs Debian packages with apt-get (root only), updating the index once if needed. */
export function aptInstall(packages) {
  if (!isRoot || which('apt-get') === null) {
    log(`missing: ${packages.join(', ')}. Install them (Debian/Ubuntu: sudo apt-get install -y ${packages.join(' ')}) and retry.`);
    process.exit(1);
  }
  log(`installing ${packages.join(', ')} with apt-get…`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  const first = spawnSync('apt-get', ['install', '-y', '--no-install-recommends', '--', ...packages], { stdio: 'inherit', env });
  if (first.status === 0) return;
  run('apt-get', ['update'], { env });
  run('apt-get', ['install', '-y', '--no-install-recommends', '--', ...packages], { env });
}

/**
 * Makes sure a Docker engine answers: when none does, installs docker.io (Debian, root) and starts
 * dockerd in the background (after clearing pid files a killed dockerd left), waiting up to 120 s for it. Without one, `required` stops the process;
 * otherwise it says what to do and returns false (the server starts and reports it in /healthz).
 */
export async function ensureDocker({ required = true } = {}) {
  if (await pingDocker()) return true;
  const fail = (message) => {
    log(message);
    if (required) process.exit(1);
    log('starting without it: deploys fail and /healthz answers 503 until an engine answers.');
    return false;
  };
  if (socketPath() !== '/var/run/docker.sock') {
    return fail(`the Docker engine at DOCKER_HOST=${process.env.DOCKER_HOST} does not answer; start it and retry.`);
  }
  if (which('dockerd') === null) {
    if (!isRoot || which('apt-get') === null) {
      return fail('no Docker engine: install Docker (https://docs.docker.com/engine/install/, or `sudo apt-get install docker.io` on Debian/Ubuntu) and start it.');
    }
    aptInstall(['docker.io']);
  }
  const dockerd = which('dockerd');
  if (dockerd === null || !isRoot) {
    return fail('no Docker engine is running. Start it (e.g. `sudo systemctl start docker`) and retry.');
  }
  const running = clearStalePidFiles();
  const logFile = '/var/log/slipway-dockerd.log';
  let exited = null;
  if (running) {
    log('a dockerd is already running but does not answer yet; waiting for it…');
  } else {
    log(`starting dockerd in the background (log: ${logFile})…`);
    const out = fs.openSync(logFile, 'a');
    const child = spawn(dockerd, [], { detached: true, stdio: ['ignore', out, out] });
    child.once('exit', (code, signal) => { exited = code ?? signal; });
    child.once('error', (err) => { exited = err.message; });
    child.unref();
  }
  const deadline = Date.now() + 120_000;
  while (Date.now() < deadline) {
    if (await pingDocker()) {
      log('Docker engine is up.');
      return true;
    }
    if (exited !== null) return fail(`dockerd exited (${exited}) before answering. The end of ${logFile}:\n${tail(logFile, 15)}`);
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
  return fail(`dockerd did not answer within 120 s. The end of ${logFile}:\n${tail(logFile, 15)}`);
}

/** True when /proc says process `pid` is alive and its command name starts with `name`. */
function processIs(pid, name) {
  try {
    return fs.readFileSync(`/proc/${pid}/comm`, 'utf8').trim().startsWith(name);
  } catch {
    return false;
  }
}

/**
 * dockerd refuses to start while /var/run/docker.pid exists, even when the process it names is long
 * gone (a machine whose previous dockerd was killed, not stopped). Removes the pid files of dockerd
 * and its containerd whose process is not running; answers whether the first one's process (dockerd) still runs. `pidFiles` pairs each file with its
 * process name.
 */
export function clearStalePidFiles(pidFiles = [['/var/run/docker.pid', 'dockerd'], ['/var/run/docker/containerd/containerd.pid', 'containerd']]) {
  let running = false;
  for (const [index, [file, name]] of pidFiles.entries()) {
    let pid;
    try {
      pid = Number.parseInt(fs.readFileSync(file, 'utf8').trim(), 10);
    } catch {
      continue;
    }
    if (Number.isInteger(pid) && pid > 0 && processIs(pid, name)) {
      if (index === 0) running = true;
      continue;
    }
    log(`removing the stale ${file} (process ${Number.isNaN(pid) ? '?' : pid} is not running)`);
    fs.rmSync(file, { force: true });
  }
  return running;
}

/** The last `lines` lines of a log file, indented, or a note that it cannot be read. */
function tail(file, lines) {
  try {
    return fs.readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).map((line) => `    ${line}`).join('\n');
  } catch (err) {
    return `    (cannot read it: ${err.message})`;
  }
}

/**
 * Installs Debian's haproxy (the default data plane, decisions §8) when no binary is found, without
 * letting the package start or enable a system HAProxy on port 80: Slipway runs its own. Never
 * fatal: without HAProxy the server serves the public port with its Node data plane.
 */
export function ensureHaproxy() {
  if ((process.env.SLIPWAY_DATA_PLANE ?? '').trim().toLowerCase() === 'node') return;
  if (which('haproxy') !== null) return;
  if (!isRoot || which('apt-get') === null) {
    log('HAProxy is not installed (Debian: apt-get install haproxy): the Node data plane serves the public port.');
    return;
  }
  if (!aptInstallServices(['haproxy'], ['haproxy'])) log('could not install haproxy: the Node data plane serves the public port.');
}

/**
 * Under `SLIPWAY_RUNTIME=swarm` without `SLIPWAY_REGISTRY`, Slipway runs Debian's registry itself
 * (decisions §16): installs `docker-registry` (root, apt) with its system service left off (Slipway
 * runs its own with its own config). Not fatal: without it the server's start says what to install.
 */
export function ensureRegistry() {
  if ((process.env.SLIPWAY_RUNTIME ?? '').trim().toLowerCase() !== 'swarm' || (process.env.SLIPWAY_REGISTRY ?? '').trim() !== '') return;
  if (fs.existsSync('/usr/bin/docker-registry')) return;
  if (!isRoot || which('apt-get') === null) {
    log("Slipway's own registry needs Debian's docker-registry (apt-get install docker-registry), or set SLIPWAY_REGISTRY.");
    return;
  }
  if (!aptInstallServices(['docker-registry'], ['docker-registry'])) log('could not install docker-registry: install it, or set SLIPWAY_REGISTRY.');
}

/**
 * Installs Debian packages that ship a system service (haproxy, nginx) without letting the packages
 * start or enable it: Slipway and its benchmarks run their own instances. Root only; false when the
 * install failed.
 */
export function aptInstallServices(packages, services) {
  if (!isRoot || which('apt-get') === null) return false;
  // policy-rc.d answering 101 forbids maintainer scripts to start services during the install.
  const policy = '/usr/sbin/policy-rc.d';
  const ownPolicy = !fs.existsSync(policy);
  if (ownPolicy) fs.writeFileSync(policy, '#!/bin/sh\n# written by Slipway while installing packages\nexit 101\n', { mode: 0o755 });
  try {
    const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
    const args = ['install', '-y', '--no-install-recommends', '--', ...packages];
    log(`installing ${packages.join(', ')} with apt-get (system services stay off)…`);
    if (spawnSync('apt-get', args, { stdio: 'inherit', env }).status !== 0) {
      spawnSync('apt-get', ['update'], { stdio: 'inherit', env });
      if (spawnSync('apt-get', args, { stdio: 'inherit', env }).status !== 0) return false;
    }
  } finally {
    if (ownPolicy) fs.rmSync(policy, { force: true });
  }
  // The packages enable their services: disable them so no boot starts a second server on port 80.
  for (const service of services) {
    if (which('systemctl') !== null) {
      spawnSync('systemctl', ['disable', '--', `${service}.service`], { stdio: 'ignore' });
      if (fs.existsSync('/run/systemd/system')) spawnSync('systemctl', ['stop', '--', `${service}.service`], { stdio: 'ignore' });
    } else if (which('update-rc.d') !== null) {
      spawnSync('update-rc.d', [service, 'disable'], { stdio: 'ignore' });
    }
  }
  return true;
}

/**
 * Makes sure a local PostgreSQL answers on loopback (Debian, root: installs `postgresql` and starts
 * its cluster) with a role `slipway` that may create databases. Returns the role's URL (to the
 * `postgres` database), or null with the reason logged when that cannot be done here.
 */
export async function ensurePostgres() {
  if (which('pg_lsclusters') === null) {
    if (!isRoot || which('apt-get') === null) {
      log('PostgreSQL is not installed (Debian: apt-get install postgresql): the PostgreSQL pass is not run.');
      return null;
    }
    const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
    const args = ['install', '-y', '--no-install-recommends', '--', 'postgresql'];
    if (spawnSync('apt-get', args, { stdio: 'inherit', env }).status !== 0) {
      spawnSync('apt-get', ['update'], { stdio: 'inherit', env });
      if (spawnSync('apt-get', args, { stdio: 'inherit', env }).status !== 0) {
        log('could not install postgresql: the PostgreSQL pass is not run.');
        return null;
      }
    }
  }
  // A cluster that cannot be created or started is reported, not fatal: the SQLite run has happened.
  const tryRun = (cmd, args) => spawnSync(cmd, args, { stdio: 'inherit' }).status === 0;
  const list = spawnSync('pg_lsclusters', ['--no-header'], { encoding: 'utf8' });
  let [version, cluster, port, status] = (list.stdout ?? '').trim().split('\n')[0]?.trim().split(/\s+/) ?? [];
  if (version === undefined || version === '') {
    const versions = fs.existsSync('/usr/lib/postgresql') ? fs.readdirSync('/usr/lib/postgresql').sort() : [];
    version = versions.at(-1);
    if (version === undefined) {
      log('no PostgreSQL version found under /usr/lib/postgresql: the PostgreSQL pass is not run.');
      return null;
    }
    if (!tryRun('pg_createcluster', [version, 'main'])) {
      log('could not create a PostgreSQL cluster: the PostgreSQL pass is not run.');
      return null;
    }
    [, cluster, port, status] = spawnSync('pg_lsclusters', ['--no-header'], { encoding: 'utf8' }).stdout.trim().split(/\s+/);
  }
  if (status !== 'online' && !tryRun('pg_ctlcluster', [version, cluster ?? 'main', 'start'])) {
    log('could not start PostgreSQL: the PostgreSQL pass is not run.');
    return null;
  }
  const psql = (sql) =>
    spawnSync('runuser', ['-u', 'postgres', '--', 'psql', '-p', String(port), '-v', 'ON_ERROR_STOP=1', '-Atc', sql], { encoding: 'utf8' });
  const deadline = Date.now() + 30_000;
  while (psql('select 1').status !== 0) {
    if (Date.now() > deadline) {
      log('PostgreSQL did not answer within 30 s: the PostgreSQL pass is not run.');
      return null;
    }
    await new Promise((resolve) => setTimeout(resolve, 300));
  }
  const role = psql(
    "DO $$BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'slipway') THEN CREATE ROLE slipway LOGIN PASSWORD 'slipway' CREATEDB; END IF; END$$;" +
      // DROP DATABASE ... WITH (FORCE) of a test database must also end an autovacuum worker there.
      ' GRANT pg_signal_backend TO slipway;',
  );
  if (role.status !== 0) {
    log(`could not create the PostgreSQL role: ${role.stderr}`);
    return null;
  }
  return `postgres://slipway:slipway@127.0.0.1:${port}/postgres`;
}
