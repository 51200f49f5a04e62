// Integration test: an engine dialled over TLS with a client certificate (SLIPWAY_SWARM_NODE_TLS), through a loopback TLS relay to the real engine that demands one.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { after, before, describe, test } from 'node:test';
import { createDockerEngine, type DockerTls } from '../../src/runtime/docker/docker-engine.js';
import { LABEL_MANAGED } from '../../src/runtime/engine.js';
import { makeCa, makeLeaf } from '../helpers/pebble.js';

describe('an engine over TLS with a client certificate', () => {
  let dir = '';
  let relay: tls.Server | undefined;
  let port = 0;
  let client: DockerTls;
  let stranger: DockerTls;

  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'slipway-engine-tls-'));
    const ca = await makeCa(dir, 'ca');
    const otherCa = await makeCa(dir, 'other-ca');
    const server = await makeLeaf(dir, 'server', ['IP:127.0.0.1'], ca);
    const mine = await makeLeaf(dir, 'client', ['DNS:slipway'], ca, 'clientAuth');
    const theirs = await makeLeaf(dir, 'stranger', ['DNS:stranger'], otherCa, 'clientAuth');
    const read = (file: string): Buffer => fs.readFileSync(file);
    client = { ca: read(ca.certFile), cert: read(mine.certFile), key: read(mine.keyFile) };
    stranger = { ca: read(ca.certFile), cert: read(theirs.certFile), key: read(theirs.keyFile) };
    // What dockerd --tlsverify does: only a client certificate signed by its CA gets through to the API.
    relay = tls.createServer({ key: read(server.keyFile), cert: read(server.certFile), ca: read(ca.certFile), requestCert: true, rejectUnauthorized: true }, (socket) => {
      const engine = net.connect('/var/run/docker.sock');
      socket.pipe(engine).pipe(socket);
      const end = (): void => {
        socket.destroy();
        engine.destroy();
      };
      socket.on('error', end).on('close', end);
      engine.on('error', end).on('close', end);
    });
    relay.on('tlsClientError', () => undefined);
    await new Promise<void>((resolve) => relay?.listen(0, '127.0.0.1', resolve));
    port = (relay.address() as net.AddressInfo).port;
  });

  after(async () => {
    await new Promise<void>((resolve) => (relay === undefined ? resolve() : relay.close(() => resolve())));
    fs.rmSync(dir, { recursive: true, force: true });
  });

  test('tcp:// and https:// with the client certificate reach the engine; without it, or with another CA\'s, they do not', async () => {
    for (const url of [`tcp://127.0.0.1:${port}`, `https://127.0.0.1:${port}`]) {
      const engine = createDockerEngine(url, {}, client);
      assert.deepEqual(await engine.listContainers({ [LABEL_MANAGED]: 'no-such-run' }), [], url);
      assert.equal(await engine.containerStats('slipway-no-such-container'), null, url);
    }
    await assert.rejects(createDockerEngine(`tcp://127.0.0.1:${port}`).containerStats('slipway-no-such-container'));
    await assert.rejects(createDockerEngine(`tcp://127.0.0.1:${port}`, {}, stranger).containerStats('slipway-no-such-container'));
    assert.throws(() => createDockerEngine(`https://127.0.0.1:${port}`), /https:\/\/host:port with TLS/);
  });
});
