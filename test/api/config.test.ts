// Unit tests: loadConfig parses the environment once and refuses bad values with a message naming the variable.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, test } from 'node:test';
import { ConfigError, LETS_ENCRYPT_DIRECTORY, loadConfig } from '../../src/config.js';
import { HEARTBEAT_MS } from '../../src/deploy/instance-heartbeat.js';
import { heartbeatEvery } from '../../src/domain/instances.js';

/** Asserts loadConfig refuses `env` with a ConfigError whose message matches `message`. */
function refuses(env: Record<string, string>, message: RegExp): void {
  assert.throws(() => loadConfig(env), (err: unknown) => {
    assert.ok(err instanceof ConfigError, `expected a ConfigError, got ${String(err)}`);
    assert.match(err.message, message);
    return true;
  });
}

describe('loadConfig', () => {
  test('defaults follow decisions §1', () => {
    const config = loadConfig({});
    assert.equal(config.port, 8080);
    assert.equal(config.host, '127.0.0.1');
    assert.equal(config.domain, 'localhost');
    assert.equal(config.dataDir, path.resolve('./data'));
    assert.equal(config.databaseUrl, undefined);
    assert.equal(config.adminEmail, undefined);
    assert.equal(config.adminPassword, undefined);
    assert.equal(config.maxUploadBytes, 536_870_912);
    assert.equal(config.allowPrivateGit, false);
    assert.equal(config.dockerHost, undefined);
  });

  test('SLIPWAY_RUNTIME: docker by default and when named; swarm with or without SLIPWAY_REGISTRY; anything else is refused', () => {
    assert.equal(loadConfig({}).runtime, 'docker');
    assert.equal(loadConfig({ SLIPWAY_RUNTIME: 'docker' }).runtime, 'docker');
    // Without SLIPWAY_REGISTRY Slipway runs its own, on SLIPWAY_REGISTRY_PORT (5000 by default).
    const own = loadConfig({ SLIPWAY_RUNTIME: 'swarm' });
    assert.equal(own.runtime, 'swarm');
    assert.equal(own.registry, undefined);
    assert.equal(own.registryPort, 5000);
    assert.equal(loadConfig({ SLIPWAY_RUNTIME: 'swarm', SLIPWAY_REGISTRY_PORT: '5001' }).registryPort, 5001);
    refuses({ SLIPWAY_REGISTRY_PORT: '70000' }, /SLIPWAY_REGISTRY_PORT/);
    refuses({ SLIPWAY_RUNTIME: 'kubernetes' }, /must be docker or swarm/);
    const swarm = loadConfig({ SLIPWAY_RUNTIME: 'swarm', SLIPWAY_REGISTRY: '10.0.0.5:5000/apps' });
    assert.equal(swarm.runtime, 'swarm');
    assert.deepEqual(swarm.registry, { address: '10.0.0.5:5000/apps' });
    assert.equal(swarm.swarmProbePath, '/bin/busybox');
    // The node guard runs unless turned off.
    assert.equal(swarm.swarmGuard, true);
    assert.equal(loadConfig({ SLIPWAY_RUNTIME: 'swarm', SLIPWAY_SWARM_GUARD: 'false' }).swarmGuard, false);
    refuses({ SLIPWAY_SWARM_GUARD: 'maybe' }, /SLIPWAY_SWARM_GUARD/);
    assert.deepEqual(loadConfig({ SLIPWAY_REGISTRY: 'registry.example.com', SLIPWAY_REGISTRY_USERNAME: 'u', SLIPWAY_REGISTRY_PASSWORD: 'p' }).registry, {
      address: 'registry.example.com',
      username: 'u',
      password: 'p',
    });
    refuses({ SLIPWAY_REGISTRY: 'someuser' }, /SLIPWAY_REGISTRY must be host\[:port\]\[\/prefix\]/);
    refuses({ SLIPWAY_REGISTRY: 'reg.example.com/Upper' }, /SLIPWAY_REGISTRY must be/);
    refuses({ SLIPWAY_REGISTRY: 'reg.example.com', SLIPWAY_REGISTRY_USERNAME: 'u' }, /set together/);
    refuses({ SLIPWAY_SWARM_PROBE: 'busybox' }, /absolute path/);
  });

  test('SLIPWAY_SWARM_NODE_ENGINES: <node>=<engine URL> entries, TLS from SLIPWAY_SWARM_NODE_TLS read at start; bad entries and missing files are refused', () => {
    assert.deepEqual(loadConfig({}).swarmNodeEngines, []);
    assert.equal(loadConfig({}).swarmNodeTls, undefined);
    const plain = loadConfig({ SLIPWAY_SWARM_NODE_ENGINES: ' 10.0.0.2=unix:///run/n2/docker.sock , worker-3=tcp://10.0.0.3:2375,' });
    assert.deepEqual(plain.swarmNodeEngines, [
      { node: '10.0.0.2', url: 'unix:///run/n2/docker.sock' },
      { node: 'worker-3', url: 'tcp://10.0.0.3:2375' },
    ]);
    refuses({ SLIPWAY_SWARM_NODE_ENGINES: '10.0.0.2' }, /SLIPWAY_SWARM_NODE_ENGINES must be a comma-separated list of <node>=<engine URL>.*got "10\.0\.0\.2"/);
    refuses({ SLIPWAY_SWARM_NODE_ENGINES: '=tcp://10.0.0.2:2376' }, /must be a comma-separated list/);
    refuses({ SLIPWAY_SWARM_NODE_ENGINES: 'a=unix:///a.sock,a=unix:///b.sock' }, /names the node "a" twice/);
    refuses({ SLIPWAY_SWARM_NODE_ENGINES: 'a=unix://docker.sock' }, /"unix:\/\/docker\.sock" is not an absolute socket path/);
    refuses({ SLIPWAY_SWARM_NODE_ENGINES: 'a=http://10.0.0.2:2375' }, /"http:\/\/10\.0\.0\.2:2375" has an unknown scheme/);
    refuses({ SLIPWAY_SWARM_NODE_ENGINES: 'a=tcp://user:pw@10.0.0.2:2376' }, /must be a host and port only/);
    refuses({ SLIPWAY_SWARM_NODE_ENGINES: 'a=tcp://10.0.0.2:2376/v1.41' }, /must be a host and port only/);
    refuses({ SLIPWAY_SWARM_NODE_ENGINES: 'a=not a url' }, /is not a URL/);
    refuses({ SLIPWAY_SWARM_NODE_ENGINES: 'a=https://10.0.0.2:2376' }, /is https:\/\/ and needs SLIPWAY_SWARM_NODE_TLS/);

    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'slipway-node-tls-'));
    try {
      refuses({ SLIPWAY_SWARM_NODE_TLS: 'certs' }, /SLIPWAY_SWARM_NODE_TLS must be an absolute path/);
      refuses({ SLIPWAY_SWARM_NODE_TLS: dir }, new RegExp(`SLIPWAY_SWARM_NODE_TLS: ${dir}/ca\\.pem cannot be read \\(ENOENT\\)`));
      fs.writeFileSync(path.join(dir, 'ca.pem'), 'CA');
      fs.writeFileSync(path.join(dir, 'cert.pem'), 'CERT');
      refuses({ SLIPWAY_SWARM_NODE_TLS: dir }, /key\.pem cannot be read/);
      fs.writeFileSync(path.join(dir, 'key.pem'), 'KEY');
      const tls = loadConfig({ SLIPWAY_SWARM_NODE_TLS: dir, SLIPWAY_SWARM_NODE_ENGINES: 'abc123=https://node-2.example.com:2376,10.0.0.3=tcp://10.0.0.3:2376' });
      assert.deepEqual(tls.swarmNodeEngines, [
        { node: 'abc123', url: 'https://node-2.example.com:2376' },
        { node: '10.0.0.3', url: 'tcp://10.0.0.3:2376' },
      ]);
      assert.deepEqual([tls.swarmNodeTls?.ca.toString(), tls.swarmNodeTls?.cert.toString(), tls.swarmNodeTls?.key.toString()], ['CA', 'CERT', 'KEY']);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  test('values are parsed', () => {
    const config = loadConfig({
      SLIPWAY_PORT: '9090',
      SLIPWAY_HOST: '0.0.0.0',
      SLIPWAY_DOMAIN: 'Apps.Example.com.',
      SLIPWAY_DATA_DIR: '/tmp/slipway-config-test',
      SLIPWAY_ADMIN_EMAIL: 'root@example.com',
      SLIPWAY_ADMIN_PASSWORD: 'long-enough',
      SLIPWAY_MAX_UPLOAD_BYTES: '1024',
      SLIPWAY_ALLOW_PRIVATE_GIT: 'TRUE',
    });
    assert.equal(config.port, 9090);
    assert.equal(config.host, '0.0.0.0');
    assert.equal(config.domain, 'apps.example.com');
    assert.equal(config.dataDir, '/tmp/slipway-config-test');
    assert.equal(config.adminEmail, 'root@example.com');
    assert.equal(config.adminPassword, 'long-enough');
    assert.equal(config.maxUploadBytes, 1024);
    assert.equal(config.allowPrivateGit, true);
    assert.equal(loadConfig({ SLIPWAY_ALLOW_PRIVATE_GIT: 'false' }).allowPrivateGit, false);
    assert.equal(loadConfig({ SLIPWAY_ALLOW_PRIVATE_GIT: '0' }).allowPrivateGit, false);
  });

  test('a bad port is refused, naming SLIPWAY_PORT', () => {
    for (const value of ['http', '-1', '65536', '80.5', '8080x', '1e3']) refuses({ SLIPWAY_PORT: value }, /SLIPWAY_PORT/);
  });

  test('a bad boolean is refused, naming the variable', () => {
    for (const value of ['maybe', 'yes please', '2']) refuses({ SLIPWAY_ALLOW_PRIVATE_GIT: value }, /SLIPWAY_ALLOW_PRIVATE_GIT.*true or false/);
  });

  test('half-set admin variables are refused', () => {
    refuses({ SLIPWAY_ADMIN_EMAIL: 'root@example.com' }, /SLIPWAY_ADMIN_EMAIL and SLIPWAY_ADMIN_PASSWORD/);
    refuses({ SLIPWAY_ADMIN_PASSWORD: 'long-enough' }, /SLIPWAY_ADMIN_EMAIL and SLIPWAY_ADMIN_PASSWORD/);
  });

  test('a short admin password or a bad admin e-mail is refused', () => {
    refuses({ SLIPWAY_ADMIN_EMAIL: 'root@example.com', SLIPWAY_ADMIN_PASSWORD: 'short' }, /SLIPWAY_ADMIN_PASSWORD.*8/);
    refuses({ SLIPWAY_ADMIN_EMAIL: 'not an email', SLIPWAY_ADMIN_PASSWORD: 'long-enough' }, /SLIPWAY_ADMIN_EMAIL/);
  });

  test('other bad values are refused with clear messages', () => {
    refuses({ SLIPWAY_MAX_UPLOAD_BYTES: '0' }, /SLIPWAY_MAX_UPLOAD_BYTES/);
    refuses({ SLIPWAY_MAX_UPLOAD_BYTES: '512MB' }, /SLIPWAY_MAX_UPLOAD_BYTES/);
    refuses({ SLIPWAY_DOMAIN: 'bad_domain!' }, /SLIPWAY_DOMAIN/);
    refuses({ SLIPWAY_LOG_LEVEL: 'loud' }, /SLIPWAY_LOG_LEVEL/);
    refuses({ SLIPWAY_PUBLIC_URL: 'ftp://x' }, /SLIPWAY_PUBLIC_URL/);
    refuses({ SLIPWAY_DEFAULT_CPUS: 'lots' }, /SLIPWAY_DEFAULT_CPUS/);
    for (const value of ['-1', '0', 'Infinity', '1e3', '0.001']) refuses({ SLIPWAY_DEFAULT_CPUS: value }, /SLIPWAY_DEFAULT_CPUS/);
    assert.equal(loadConfig({ SLIPWAY_DEFAULT_CPUS: '1.5' }).defaultNanoCpus, 1_500_000_000);
    refuses({ SLIPWAY_DATABASE_URL: 'mysql://x' }, /SLIPWAY_DATABASE_URL/);
  });

  test('SLIPWAY_INSTANCE_LOST_SECONDS: 30 by default (decisions §15), beating every sixth of it; an override; out of range refused', () => {
    assert.equal(loadConfig({}).instanceLostMs, 30_000);
    assert.equal(heartbeatEvery(loadConfig({}).instanceLostMs), HEARTBEAT_MS);
    assert.equal(loadConfig({ SLIPWAY_INSTANCE_LOST_SECONDS: '6' }).instanceLostMs, 6_000);
    assert.equal(heartbeatEvery(6_000), 1_000);
    for (const value of ['2', '3601', 'soon']) refuses({ SLIPWAY_INSTANCE_LOST_SECONDS: value }, /SLIPWAY_INSTANCE_LOST_SECONDS/);
  });

  test('resource ceilings and the pids limit: defaults, overrides, and defaults above a ceiling refused', () => {
    const defaults = loadConfig({});
    assert.equal(defaults.maxMemoryMb, 2048);
    assert.equal(defaults.maxCpus, 2);
    assert.equal(defaults.appPidsLimit, 512);
    const set = loadConfig({ SLIPWAY_MAX_MEMORY_MB: '4096', SLIPWAY_MAX_CPUS: '3.5', SLIPWAY_APP_PIDS_LIMIT: '100' });
    assert.equal(set.maxMemoryMb, 4096);
    assert.equal(set.maxCpus, 3.5);
    assert.equal(set.appPidsLimit, 100);
    refuses({ SLIPWAY_MAX_MEMORY_MB: '256' }, /SLIPWAY_DEFAULT_MEMORY_MB must not exceed SLIPWAY_MAX_MEMORY_MB/);
    refuses({ SLIPWAY_MAX_CPUS: '0.5' }, /SLIPWAY_DEFAULT_CPUS must not exceed SLIPWAY_MAX_CPUS/);
    refuses({ SLIPWAY_APP_PIDS_LIMIT: '0' }, /SLIPWAY_APP_PIDS_LIMIT/);
    refuses({ SLIPWAY_MAX_MEMORY_MB: 'lots' }, /SLIPWAY_MAX_MEMORY_MB/);
  });

  test('build sandbox settings: defaults, overrides, bad values refused', () => {
    const defaults = loadConfig({});
    assert.equal(defaults.buildNetwork, 'confined');
    assert.equal(defaults.buildMemoryBytes, 2048 * 1024 * 1024);
    assert.equal(defaults.buildNanoCpus, 2_000_000_000);
    assert.equal(defaults.buildPidsLimit, 1024);
    const set = loadConfig({ SLIPWAY_BUILD_NETWORK: 'none', SLIPWAY_BUILD_MEMORY_MB: '512', SLIPWAY_BUILD_CPUS: '0.5', SLIPWAY_BUILD_PIDS_LIMIT: '100' });
    assert.equal(set.buildNetwork, 'none');
    assert.equal(set.buildMemoryBytes, 512 * 1024 * 1024);
    assert.equal(set.buildNanoCpus, 500_000_000);
    assert.equal(set.buildPidsLimit, 100);
    refuses({ SLIPWAY_BUILD_NETWORK: 'host' }, /SLIPWAY_BUILD_NETWORK must be one of confined, none/);
    refuses({ SLIPWAY_BUILD_MEMORY_MB: '8' }, /SLIPWAY_BUILD_MEMORY_MB/);
    refuses({ SLIPWAY_BUILD_PIDS_LIMIT: 'many' }, /SLIPWAY_BUILD_PIDS_LIMIT/);
  });
  test('HAProxy threads: half the CPUs by default (at least 1), an override, bad values refused', () => {
    assert.equal(loadConfig({}).haproxyThreads, Math.max(1, Math.floor(os.availableParallelism() / 2)));
    assert.equal(loadConfig({ SLIPWAY_HAPROXY_THREADS: '4' }).haproxyThreads, 4);
    refuses({ SLIPWAY_HAPROXY_THREADS: '0' }, /SLIPWAY_HAPROXY_THREADS must be between 1 and 64/);
    refuses({ SLIPWAY_HAPROXY_THREADS: 'all' }, /SLIPWAY_HAPROXY_THREADS must be a whole number/);
  });
  test('HTTPS settings (§8): off by default; parsed when SLIPWAY_HTTPS_PORT is set; bad values refused', () => {
    assert.equal(loadConfig({}).https, undefined);
    const defaults = loadConfig({ SLIPWAY_HTTPS_PORT: '8443' });
    assert.deepEqual(defaults.https, {
      port: 8443,
      acmeDirectoryUrl: LETS_ENCRYPT_DIRECTORY,
      acmeEmail: undefined,
      acmeCaFile: undefined,
      certFile: undefined,
      keyFile: undefined,
    });
    const set = loadConfig({
      SLIPWAY_HTTPS_PORT: '443',
      SLIPWAY_ACME_DIRECTORY_URL: 'https://127.0.0.1:14000/dir',
      SLIPWAY_ACME_EMAIL: 'ops@example.com',
      SLIPWAY_ACME_CA_FILE: 'ca.pem',
      SLIPWAY_TLS_CERT_FILE: '/etc/slipway/cert.pem',
      SLIPWAY_TLS_KEY_FILE: '/etc/slipway/key.pem',
    });
    assert.equal(set.https?.acmeDirectoryUrl, 'https://127.0.0.1:14000/dir');
    assert.equal(set.https?.acmeEmail, 'ops@example.com');
    assert.equal(set.https?.acmeCaFile, path.resolve('ca.pem'));
    assert.equal(set.https?.certFile, '/etc/slipway/cert.pem');
    refuses({ SLIPWAY_HTTPS_PORT: '70000' }, /SLIPWAY_HTTPS_PORT/);
    refuses({ SLIPWAY_HTTPS_PORT: '443', SLIPWAY_ACME_DIRECTORY_URL: 'http://ca.example/dir' }, /SLIPWAY_ACME_DIRECTORY_URL must be an https/);
    refuses({ SLIPWAY_HTTPS_PORT: '443', SLIPWAY_ACME_DIRECTORY_URL: 'not a url' }, /SLIPWAY_ACME_DIRECTORY_URL is not a URL/);
    refuses({ SLIPWAY_HTTPS_PORT: '443', SLIPWAY_ACME_EMAIL: 'nobody' }, /SLIPWAY_ACME_EMAIL/);
    refuses({ SLIPWAY_HTTPS_PORT: '443', SLIPWAY_TLS_CERT_FILE: '/c.pem' }, /SLIPWAY_TLS_CERT_FILE and SLIPWAY_TLS_KEY_FILE must be set together/);
  });
});
