// HAProxy's own answers (issue 23 item 9): the body idle bound on app hosts, answered with {error, message} JSON.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { startPlane, type PlaneUnderTest } from '../helpers/planes.js';

const DOMAIN = 'answers.test';

/** Writes `bytes` on a fresh connection to the public port; resolves with everything read until it closes. */
function exchange(port: number, bytes: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let text = '';
    socket.setEncoding('latin1');
    // Far above every bound under test (2 s): only a missing bound reaches it.
    socket.setTimeout(40_000, () => reject(new Error(`no close within 40 s; read ${JSON.stringify(text)}`)));
    socket.on('data', (chunk: string) => (text += chunk));
    socket.on('error', () => undefined);
    socket.on('close', () => resolve(text));
    socket.write(bytes);
  });
}

/** The JSON body of a raw HTTP answer. */
function jsonBody(answer: string): unknown {
  return JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4));
}

describe('HAProxy’s own answers', () => {
  let plane: PlaneUnderTest;
  let app: Server;

  before(async () => {
    plane = await startPlane('haproxy', DOMAIN, { SLIPWAY_BODY_IDLE_TIMEOUT_SECONDS: '2' });
    // An app that reads the whole body before it answers.
    app = createServer((req, res) => {
      req.resume();
      req.on('end', () => res.end('done'));
    });
    app.listen(0, '127.0.0.1');
    await once(app, 'listening');
    plane.table.set('app', { kind: 'app', deploymentId: 'dep-app', state: 'live', upstreams: [{ host: '127.0.0.1', port: (app.address() as AddressInfo).port }] });
  });
  after(async () => {
    app.closeAllConnections();
    app.close();
    await plane.close();
  });

  test('a body that stops on an app host is ended by SLIPWAY_BODY_IDLE_TIMEOUT_SECONDS (408), not by the 60 s upstream bound (504)', async () => {
    // The app's route must be in HAProxy's map first: then a whole request is answered by the app.
    const deadline = Date.now() + 20_000;
    for (;;) {
      const whole = await exchange(plane.port, `POST / HTTP/1.1\r\nHost: app.${DOMAIN}\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc`);
      if (/^HTTP\/1\.1 200 [^]*done$/.test(whole)) break;
      if (Date.now() > deadline) assert.fail(`the app never answered: ${whole}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const answer = await exchange(plane.port, `POST / HTTP/1.1\r\nHost: app.${DOMAIN}\r\nContent-Length: 100\r\n\r\n0123456789`);
    assert.match(answer, /^HTTP\/1\.1 408 /);
    assert.deepEqual(jsonBody(answer), { error: 'validation_error', message: 'the request did not arrive in time' });
  });
});
