// The stand-in database images (`npm run stand-in-images`, decisions §19): each keeps its official
// image's contract. Real containers on the real engine, with no network (`--network none`): the databases
// initialise from their environment on an empty volume, answer their client tools over TCP on
// 127.0.0.1 inside the container, listen on every interface, run as their own user, and keep their
// data across a restart. `npm test` builds the
// images first (scripts/test.mjs), so a missing image fails here.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { after, describe, test } from 'node:test';
import { promisify } from 'node:util';

const run = promisify(execFile);
const prefix = `slipway-test-standin-${process.pid}`;
const containers: string[] = [];
const volumes: string[] = [];

after(async () => {
  for (const name of containers) await run('docker', ['rm', '--force', '--volumes', '--', name]).catch(() => undefined);
  for (const name of volumes) await run('docker', ['volume', 'rm', '--force', '--', name]).catch(() => undefined);
});

async function docker(args: string[], timeout = 120_000): Promise<string> {
  const { stdout } = await run('docker', args, { timeout, maxBuffer: 16 * 1024 * 1024 });
  return stdout;
}

/** `docker exec` of an argv; resolves with stdout, rejects with the command's stderr. */
async function exec(container: string, argv: string[], env: Record<string, string> = {}): Promise<string> {
  const envArgs = Object.entries(env).flatMap(([key, value]) => ['--env', `${key}=${value}`]);
  return docker(['exec', ...envArgs, '--', container, ...argv], 60_000);
}

/** Retries `fn` until it resolves (a database still initialising), for up to `ms`. */
async function eventually<T>(fn: () => Promise<T>, ms = 180_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    try {
      return await fn();
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
  }
}

/** Starts a detached container on no network with a fresh named volume at `dataDir`. */
async function startDatabase(kind: string, image: string, dataDir: string, env: Record<string, string>, command: string[] = []): Promise<string> {
  const name = `${prefix}-${kind}`;
  const volume = `${name}-data`;
  containers.push(name);
  volumes.push(volume);
  const envArgs = Object.entries(env).flatMap(([key, value]) => ['--env', `${key}=${value}`]);
  await docker(['run', '--detach', '--name', name, '--network', 'none', '--volume', `${volume}:${dataDir}`, ...envArgs, '--', image, ...command]);
  return name;
}

/** The user id of the container's PID 1 (the server itself, not a wrapper). */
async function pid1Uid(container: string): Promise<{ name: string; uid: number }> {
  const status = await exec(container, ['cat', '/proc/1/status']);
  const name = /^Name:\s+(\S+)/m.exec(status)?.[1] ?? '';
  const uid = Number(/^Uid:\s+(\d+)/m.exec(status)?.[1]);
  return { name, uid };
}

/** True when /proc/net/tcp shows a socket listening on 0.0.0.0:`port` (every IPv4 interface). */
async function listensOnAll(container: string, port: number): Promise<boolean> {
  const table = await exec(container, ['cat', '/proc/net/tcp']);
  const local = `00000000:${port.toString(16).toUpperCase().padStart(4, '0')}`;
  return table.split('\n').some((line) => {
    const fields = line.trim().split(/\s+/);
    return fields[1] === local && fields[3] === '0A';
  });
}

async function onPath(container: string, tools: string[]): Promise<void> {
  for (const tool of tools) {
    const found = await exec(container, ['sh', '-c', 'command -v "$1"', 'sh', tool]);
    assert.match(found.trim(), new RegExp(`/${tool}$`), `${tool} is on PATH`);
  }
}

describe('database images keep the official contracts', { concurrency: true }, () => {
  test('postgres: initialises user, password and database, scram over TCP, data kept across a restart', async () => {
    const password = "s3cret pass'word";
    const name = await startDatabase('pg', 'slipway-stand-in/postgres:15', '/var/lib/postgresql/data', {
      POSTGRES_PASSWORD: password,
      POSTGRES_USER: 'app',
      POSTGRES_DB: 'appdb',
    });
    const psql = (sql: string, pass = password) =>
      exec(name, ['psql', '--host=127.0.0.1', '--username=app', '--dbname=appdb', '--no-psqlrc', '-v', 'ON_ERROR_STOP=1', '-Atc', sql], { PGPASSWORD: pass });
    assert.equal((await eventually(() => psql('select current_user'))).trim(), 'app');
    await psql("create table notes (body text); insert into notes values ('kept')");
    await assert.rejects(psql('select 1', 'wrong'), /password authentication failed/);
    assert.ok(await listensOnAll(name, 5432), 'postgres listens on 0.0.0.0:5432');
    assert.deepEqual(await pid1Uid(name).then((p) => [p.name, p.uid !== 0]), ['postgres', true]);
    assert.equal((await exec(name, ['id', '-un', '--', String((await pid1Uid(name)).uid)])).trim(), 'postgres');
    await onPath(name, ['pg_dump', 'pg_restore', 'psql', 'pg_receivewal', 'pg_basebackup']);
    const dump = await exec(name, ['pg_dump', '--host=127.0.0.1', '--username=app', '--dbname=appdb', '--table=notes'], { PGPASSWORD: password });
    assert.match(dump, /CREATE TABLE public\.notes/);

    await docker(['restart', '--', name]);
    assert.equal((await eventually(() => psql('select body from notes'))).trim(), 'kept');
    assert.doesNotMatch(await docker(['logs', '--', name]).then(String), /initdb: error/);
  });

  test('postgres: an empty data directory without POSTGRES_PASSWORD stops with a clear message', async () => {
    const { stdout, stderr } = await run('docker', ['run', '--rm', '--network', 'none', '--', 'slipway-stand-in/postgres:15'], { timeout: 120_000 }).then(
      () => ({ stdout: '', stderr: 'started' }),
      (err: { stdout: string; stderr: string }) => err,
    );
    assert.match(stdout + stderr, /POSTGRES_PASSWORD is not set/);
  });

  test('postgres: flags after the image go to the server (`-c key=value`)', async () => {
    const name = await startDatabase('pg-flags', 'slipway-stand-in/postgres:15', '/var/lib/postgresql/data', { POSTGRES_PASSWORD: 'pw' }, ['-c', 'max_connections=42']);
    const shown = await eventually(() => exec(name, ['psql', '--host=127.0.0.1', '--username=postgres', '-Atc', 'show max_connections'], { PGPASSWORD: 'pw' }));
    assert.equal(shown.trim(), '42');
  });

  test('mariadb: initialises root, database and user over TCP, data kept across a restart', async () => {
    const password = 'app pa$$ \\ word';
    const name = await startDatabase('maria', 'slipway-stand-in/mariadb:10.11', '/var/lib/mysql', {
      MARIADB_ROOT_PASSWORD: 'rootpw',
      MARIADB_DATABASE: 'appdb',
      MARIADB_USER: 'app',
      MARIADB_PASSWORD: password,
    });
    const sql = (query: string, user = 'app', pass = password) =>
      exec(name, ['mariadb', '--host=127.0.0.1', '--protocol=tcp', `--user=${user}`, `--password=${pass}`, '--batch', '--skip-column-names', 'appdb', '--execute', query]);
    assert.equal((await eventually(() => sql('select current_user()'))).trim(), 'app@%');
    await sql("create table notes (body text); insert into notes values ('kept')");
    await assert.rejects(sql('select 1', 'app', 'wrong'), /Access denied/);
    assert.equal((await sql('select count(*) from appdb.notes', 'root', 'rootpw')).trim(), '1');
    assert.ok(await listensOnAll(name, 3306), 'mariadbd listens on 0.0.0.0:3306');
    const pid1 = await pid1Uid(name);
    assert.equal(pid1.name, 'mariadbd');
    assert.equal((await exec(name, ['id', '-un', '--', String(pid1.uid)])).trim(), 'mysql');
    await onPath(name, ['mariadb', 'mariadb-dump', 'mariadb-admin']);
    const dump = await exec(name, ['mariadb-dump', '--host=127.0.0.1', '--user=app', `--password=${password}`, 'appdb', 'notes']);
    assert.match(dump, /CREATE TABLE `notes`/);

    await docker(['restart', '--', name]);
    assert.equal((await eventually(() => sql('select body from notes'))).trim(), 'kept');
  });

  test('mariadb: the MYSQL_* names work too, and no root password option stops with a clear message', async () => {
    const name = await startDatabase('mysql-names', 'slipway-stand-in/mariadb:10.11', '/var/lib/mysql', {
      MYSQL_ROOT_PASSWORD: 'rootpw',
      MYSQL_DATABASE: 'legacy',
      MYSQL_USER: 'old',
      MYSQL_PASSWORD: 'oldpw',
    });
    const shown = await eventually(() => exec(name, ['mariadb', '--host=127.0.0.1', '--user=old', '--password=oldpw', '--batch', '--skip-column-names', 'legacy', '--execute', 'select database()']));
    assert.equal(shown.trim(), 'legacy');
    const { stdout, stderr } = await run('docker', ['run', '--rm', '--network', 'none', '--', 'slipway-stand-in/mariadb:10.11'], { timeout: 120_000 }).then(
      () => ({ stdout: '', stderr: 'started' }),
      (err: { stdout: string; stderr: string }) => err,
    );
    assert.match(stdout + stderr, /MARIADB_ROOT_PASSWORD/);
  });

  test('redis: redis-server takes its arguments, listens on every interface unprotected, keeps its AOF in /data', async () => {
    const name = await startDatabase('redis', 'slipway-stand-in/redis:7', '/data', {}, ['redis-server', '--requirepass', 'pw', '--appendonly', 'yes']);
    const cli = (...args: string[]) => exec(name, ['redis-cli', '-h', '127.0.0.1', '-a', 'pw', '--no-auth-warning', ...args]);
    assert.equal((await eventually(() => cli('ping'))).trim(), 'PONG');
    assert.match(await exec(name, ['redis-cli', '-h', '127.0.0.1', 'ping']), /NOAUTH/);
    assert.equal((await cli('set', 'note', 'kept')).trim(), 'OK');
    assert.deepEqual((await cli('config', 'get', 'protected-mode')).trim().split('\n'), ['protected-mode', 'no']);
    assert.deepEqual((await cli('config', 'get', 'dir')).trim().split('\n'), ['dir', '/data']);
    assert.ok(await listensOnAll(name, 6379), 'redis listens on 0.0.0.0:6379');
    const pid1 = await pid1Uid(name);
    assert.equal(pid1.name, 'redis-server');
    assert.equal((await exec(name, ['id', '-un', '--', String(pid1.uid)])).trim(), 'redis');

    await docker(['restart', '--', name]);
    assert.equal((await eventually(() => cli('get', 'note'))).trim(), 'kept');
  });
});

