// Slipway's own registry (decisions §16): its config file, its supervision (a stand-in program that dies on demand) and Debian's docker-registry answering without a login.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { ConfigError } from '../../src/config.js';
import { checkRegistryBinary, hostPort, nextRestartDelay, OwnRegistry, REGISTRY_BINARY, writeRegistryConfig } from '../../src/runtime/swarm/own-registry.js';
import { eventually, tempDir } from '../helpers/apps.js';
import { freePort } from '../helpers/net.js';

const dirs: string[] = [];
const dir = (label: string): string => {
  const made = tempDir(label);
  dirs.push(made);
  return made;
};
after(() => {
  for (const made of dirs) fs.rmSync(made, { recursive: true, force: true });
});

/** A stand-in registry: answers /v2/ on the config's addr; exits at once while `<its dir>/crash` exists. */
function fakeRegistry(): { binary: string; crash(on: boolean): void } {
  const home = dir('fake-registry');
  const binary = path.join(home, 'registry');
  fs.writeFileSync(
    binary,
    `#!${process.execPath}
const fs = require('node:fs'), http = require('node:http'), path = require('node:path');
const addr = JSON.parse(/addr: (".*")/.exec(fs.readFileSync(process.argv[3], 'utf8'))[1]);
if (fs.existsSync(path.join(__dirname, 'crash'))) { console.error('listen tcp ' + addr + ': bind: address already in use'); process.exit(1); }
const colon = addr.lastIndexOf(':');
http.createServer((req, res) => { res.writeHead(req.url === '/v2/' ? 200 : 404, { 'content-type': 'application/json' }); res.end('{}'); })
  .listen(Number(addr.slice(colon + 1)), addr.slice(0, colon));
process.on('SIGTERM', () => process.exit(0));
`,
    { mode: 0o755 },
  );
  return { binary, crash: (on) => (on ? fs.writeFileSync(path.join(home, 'crash'), '') : fs.rmSync(path.join(home, 'crash'), { force: true })) };
}

const answers = async (address: string): Promise<boolean> =>
  fetch(`http://${address}/v2/`, { signal: AbortSignal.timeout(5_000) }).then(
    (res) => res.status === 200,
    () => false,
  );
const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};
const logs: string[] = [];
const log = (_level: string, msg: string): void => void logs.push(msg);

describe("Slipway's own registry", () => {
  test('its config: filesystem storage under the data directory, the given address, deletes on, no login, no debug server; mode 0600', async () => {
    const data = dir('registry-config');
    const file = await writeRegistryConfig(data, '10.0.0.11:5000');
    assert.equal(file, path.join(data, 'registry.yml'));
    assert.equal(fs.statSync(file).mode & 0o777, 0o600);
    assert.ok(fs.statSync(path.join(data, 'registry')).isDirectory());
    const text = fs.readFileSync(file, 'utf8');
    assert.match(text, new RegExp(`rootdirectory: ${JSON.stringify(path.join(data, 'registry')).replace(/[/.]/g, '\\$&')}`));
    assert.match(text, /addr: "10\.0\.0\.11:5000"/);
    assert.match(text, /delete:\n\s+enabled: true/);
    assert.match(text, /secret: "[A-Za-z0-9_-]{43}"/);
    assert.doesNotMatch(text, /auth|htpasswd|debug|health/);
    // A new secret each time; no temp file left.
    await writeRegistryConfig(data, '10.0.0.11:5000');
    assert.notEqual(fs.readFileSync(file, 'utf8'), text);
    assert.deepEqual(fs.readdirSync(data).sort(), ['registry', 'registry.yml']);
    assert.equal(hostPort('fd00::1', 5000), '[fd00::1]:5000');
  });

  test('a missing binary is a start-up error that says what to install', async () => {
    await assert.rejects(checkRegistryBinary('/nonexistent/docker-registry'), (err: unknown) => err instanceof ConfigError && /apt-get install docker-registry/.test(err.message));
    const registry = new OwnRegistry({ dataDir: dir('registry-missing'), host: '127.0.0.1', port: await freePort(), log, binary: '/nonexistent/docker-registry' });
    await assert.rejects(registry.start(), /apt-get install docker-registry/);
    assert.equal(registry.starts, 0);
  });

  test('restart delays double from the first up to 30 s', () => {
    const delays = [0];
    for (let i = 0; i < 10; i++) delays.push(nextRestartDelay(delays.at(-1) ?? 0));
    assert.deepEqual(delays.slice(1), [500, 1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000, 30000]);
  });

  test('supervised: answers after start, restarted when it dies, ended (and not restarted) by stop', async () => {
    const fake = fakeRegistry();
    const data = dir('registry-supervised');
    const registry = new OwnRegistry({ dataDir: data, host: '127.0.0.1', port: await freePort(), log, binary: fake.binary, restartFirstMs: 50 });
    await registry.start();
    try {
      assert.ok(await answers(registry.address));
      const first = registry.pid;
      assert.ok(first !== undefined);
      assert.equal(fs.readFileSync(path.join(data, 'registry.pid'), 'utf8'), String(first));
      process.kill(first, 'SIGKILL');
      // A push waits through the restart: ready() resolves once it answers again.
      await eventually(async () => (registry.pid === first ? undefined : true), 30_000, 'the registry to be seen dead');
      await registry.ready();
      assert.ok(await answers(registry.address));
      const second = await eventually(async () => {
        const pid = registry.pid;
        return pid !== undefined && pid !== first && (await answers(registry.address)) ? pid : undefined;
      }, 30_000, 'the registry to be restarted');
      assert.equal(registry.starts, 2);
      assert.ok(logs.some((line) => /was killed by SIGKILL; restarting it/.test(line)));
      await registry.stop();
      await eventually(async () => (alive(second) ? undefined : true), 30_000, 'the registry to end');
      assert.equal(registry.pid, undefined);
      assert.equal(await answers(registry.address), false);
      await assert.rejects(registry.ready(), /stopped/);
      assert.equal(registry.starts, 2);
    } finally {
      await registry.stop();
    }
  });

  test('one that keeps dying is restarted with backoff; start gives up with its last output, and stops it', async () => {
    const fake = fakeRegistry();
    fake.crash(true);
    const registry = new OwnRegistry({ dataDir: dir('registry-crash'), host: '127.0.0.1', port: await freePort(), log, binary: fake.binary, readyTimeoutMs: 8_000, restartFirstMs: 50 });
    await assert.rejects(registry.start(), /did not answer at http:\/\/127\.0\.0\.1:\d+\/v2\/ within 8 s; its last output:\n.*address already in use/);
    const starts = registry.starts;
    assert.ok(starts >= 2, `restarted while waiting (${starts} starts)`);
    assert.equal(registry.pid, undefined);
    // Stopped: the next death is not followed by a start.
    fake.crash(false);
    await assert.rejects(registry.ready(), /stopped/);
    assert.equal(registry.starts, starts);
  });

  test('a registry left running by a killed server (its pid recorded) is ended before a new one starts', async () => {
    const fake = fakeRegistry();
    const data = dir('registry-leftover');
    const port = await freePort();
    const config = await writeRegistryConfig(data, `127.0.0.1:${port}`);
    const leftover = spawn(fake.binary, ['serve', config], { stdio: 'ignore' });
    try {
      fs.writeFileSync(path.join(data, 'registry.pid'), String(leftover.pid));
      await eventually(async () => ((await answers(`127.0.0.1:${port}`)) ? true : undefined), 30_000, 'the leftover to answer');
      const exited = new Promise((resolve) => leftover.once('exit', resolve));
      const registry = new OwnRegistry({ dataDir: data, host: '127.0.0.1', port, log, binary: fake.binary });
      await registry.start();
      try {
        await exited;
        assert.notEqual(registry.pid, leftover.pid);
        assert.ok(await answers(registry.address));
        assert.equal(registry.starts, 1);
      } finally {
        await registry.stop();
      }
    } finally {
      leftover.kill('SIGKILL');
    }
  });

  test("Debian's docker-registry runs with this config: /v2/ and the catalog answer without a login", async () => {
    const data = dir('registry-debian');
    const registry = new OwnRegistry({ dataDir: data, host: '127.0.0.1', port: await freePort(), log, binary: REGISTRY_BINARY });
    await registry.start();
    try {
      const v2 = await fetch(`http://${registry.address}/v2/`);
      assert.equal(v2.status, 200, await v2.text());
      const catalog = await fetch(`http://${registry.address}/v2/_catalog`);
      assert.equal(catalog.status, 200);
      assert.deepEqual(await catalog.json(), { repositories: [] });
    } finally {
      await registry.stop();
    }
    assert.equal(await answers(registry.address), false);
  });
});
