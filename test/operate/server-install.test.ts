// `slipway server install` (contract §25): the unit passes `systemd-analyze verify`, the settings file is 0600 and kept on a second run.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { test } from 'node:test';
import { promisify } from 'node:util';
import type { CliIo } from '../../src/cli/cli-io.js';
import { runInstall, type InstallOptions } from '../../src/cli/server-install.js';
import { renderSettingsFile } from '../../src/operate/systemd-unit.js';
import { cli } from '../helpers/cli.js';

const run = promisify(execFile);

/** systemd-analyze verify on a unit file: its findings (warnings included), empty when the unit is clean. */
async function verify(unitFile: string): Promise<string> {
  try {
    const { stdout, stderr } = await run('systemd-analyze', ['verify', '--', unitFile], { timeout: 60_000 });
    return (stdout + stderr).trim();
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string; message: string };
    return `failed: ${e.stdout ?? ''}${e.stderr ?? e.message}`;
  }
}

async function install(dir: string, env: Record<string, string>, options: InstallOptions): Promise<{ stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const out = new PassThrough().on('data', (c: Buffer) => (stdout += c.toString()));
  const err = new PassThrough().on('data', (c: Buffer) => (stderr += c.toString()));
  const io: CliIo = { stdout: out, stderr: err, stdin: new PassThrough(), env: { url: undefined, apiKey: undefined, configDir: dir }, cwd: dir, onInterrupt: () => () => undefined };
  await runInstall(io, options, { env, systemdRunning: () => false });
  return { stdout, stderr };
}

test('`slipway server install --print` prints a unit that systemd-analyze verifies clean, and writes nothing', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'slipway-install-'));
  try {
    const result = await cli(['server', 'install', '--print', '--settings-file', path.join(dir, 'slipway.env')], { home: os.tmpdir(), env: { SLIPWAY_DATA_DIR: path.join(dir, 'data') } });
    assert.equal(result.code, 0, result.stderr);
    const unit = result.stdout;
    assert.match(unit, /^Restart=on-failure$/m);
    assert.match(unit, /^After=.*network-online\.target.*docker\.service/m);
    assert.match(unit, /^Wants=.*network-online\.target.*docker\.service/m);
    assert.match(unit, new RegExp(`^EnvironmentFile=${path.join(dir, 'slipway.env')}$`, 'm'));
    assert.match(unit, new RegExp(`^ExecStart=${process.execPath} \\S+/bin/slipway\\.js server$`, 'm'));
    assert.deepEqual(fs.readdirSync(dir), [], '--print wrote nothing');
    const unitFile = path.join(dir, 'slipway.service');
    fs.writeFileSync(unitFile, unit);
    assert.equal(await verify(unitFile), '');
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('`slipway server install` writes the settings it was run with to a 0600 file (kept on a second run) and a unit that verifies; without systemd it says what to do', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'slipway-install-'));
  try {
    const settingsFile = path.join(dir, 'etc', 'slipway.env');
    const unitFile = path.join(dir, 'units', 'slipway.service');
    const env = { SLIPWAY_DOMAIN: 'apps.example.com', SLIPWAY_PORT: '80', SLIPWAY_DATA_DIR: 'relative-data', SLIPWAY_ADMIN_PASSWORD: "it's $secret", SLIPWAY_ADMIN_EMAIL: 'ops@example.com', SLIPWAY_URL: 'http://client.example', PATH: '/usr/bin', SLIPWAY_LOG_LEVEL: '' };
    const first = await install(dir, env, { settingsFile, unitFile });
    assert.match(first.stderr, /systemd is not running/);
    assert.match(first.stderr, /systemctl daemon-reload && systemctl enable --now slipway\.service/);
    assert.equal(fs.statSync(settingsFile).mode & 0o777, 0o600);
    const written = fs.readFileSync(settingsFile, 'utf8');
    assert.equal(written, renderSettingsFile({ SLIPWAY_DOMAIN: 'apps.example.com', SLIPWAY_PORT: '80', SLIPWAY_DATA_DIR: path.resolve('relative-data'), SLIPWAY_ADMIN_EMAIL: 'ops@example.com', SLIPWAY_ADMIN_PASSWORD: "it's $secret" }));
    assert.doesNotMatch(written, /SLIPWAY_URL|PATH=|SLIPWAY_LOG_LEVEL/);
    assert.equal(await verify(unitFile), '');

    // A second run keeps the operator's file as it is.
    fs.writeFileSync(settingsFile, 'SLIPWAY_DOMAIN=edited.example.com\n', { mode: 0o600 });
    const second = await install(dir, { SLIPWAY_DOMAIN: 'other.example.com' }, { settingsFile, unitFile });
    assert.match(second.stderr, /Kept the existing/);
    assert.equal(fs.readFileSync(settingsFile, 'utf8'), 'SLIPWAY_DOMAIN=edited.example.com\n');
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('a bad setting is refused before anything is written', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'slipway-install-'));
  try {
    await assert.rejects(install(dir, { SLIPWAY_PORT: 'eighty' }, { settingsFile: path.join(dir, 's.env'), unitFile: path.join(dir, 'u.service') }), /SLIPWAY_PORT must be a whole number/);
    assert.deepEqual(fs.readdirSync(dir), []);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('with systemd running: daemon-reload, then enable --now slipway.service; a failing systemctl is reported with its own words', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'slipway-install-'));
  const savedPath = process.env['PATH'];
  try {
    // A stand-in systemctl first on PATH (this host has no running systemd): it records each call, and fails `enable` when asked to.
    const bin = path.join(dir, 'bin');
    fs.mkdirSync(bin);
    const calls = path.join(dir, 'calls');
    fs.writeFileSync(path.join(bin, 'systemctl'), `#!/bin/sh\necho "$*" >> '${calls}'\nif [ "$1" = enable ] && [ -e '${dir}/fail' ]; then echo "Failed to enable unit: Unit file slipway.service does not exist." >&2; exit 1; fi\n`, { mode: 0o755 });
    process.env['PATH'] = `${bin}:${savedPath ?? '/usr/bin:/bin'}`;
    const options = { settingsFile: path.join(dir, 'slipway.env'), unitFile: path.join(dir, 'slipway.service') };
    let stderr = '';
    const err = new PassThrough().on('data', (c: Buffer) => (stderr += c.toString()));
    const io: CliIo = { stdout: new PassThrough(), stderr: err, stdin: new PassThrough(), env: { url: undefined, apiKey: undefined, configDir: dir }, cwd: dir, onInterrupt: () => () => undefined };
    await runInstall(io, options, { env: { SLIPWAY_PORT: '8080' }, systemdRunning: () => true });
    assert.equal(fs.readFileSync(calls, 'utf8'), 'daemon-reload\nenable --now slipway.service\n');
    assert.match(stderr, /Enabled and started slipway\.service\. Follow it with: journalctl -u slipway\.service -f/);

    fs.writeFileSync(path.join(dir, 'fail'), '');
    await assert.rejects(runInstall(io, options, { env: { SLIPWAY_PORT: '8080' }, systemdRunning: () => true }), /^CliError: systemctl enable --now slipway\.service failed: Failed to enable unit: Unit file slipway\.service does not exist\.$/);
  } finally {
    process.env['PATH'] = savedPath;
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
