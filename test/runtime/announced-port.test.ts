// Unit tests: the port an app's output announces, as the common servers word it.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { announcedPorts, wrongAnnouncedPort } from '../../src/runtime/announced-port.js';

test('announcements of the common servers', () => {
  const cases: Array<[string, number[]]> = [
    ['listening on :3000', [3000]],
    ['Server listening on port 3000', [3000]],
    ['Listening on 0.0.0.0:5000', [5000]],
    ['listening on 8080', [8080]],
    [' * Running on http://127.0.0.1:5000', [5000]],
    ['ready - started server on 0.0.0.0:3000, url: http://localhost:3000', [3000]],
    ['[INFO] Listening at: http://0.0.0.0:8000 (7)', [8000]],
    ['Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)', [8000]],
    ['bound to [::]:9000', [9000]],
    ['compiled 3000 modules in 2 s', []],
    ['connected to postgres:5432', []],
  ];
  for (const [line, ports] of cases) assert.deepEqual(announcedPorts(line), ports, line);
});

test('a wrong port is the last one announced, unless PORT is announced too', () => {
  assert.equal(wrongAnnouncedPort('listening on :3000\n', 8080), 3000);
  assert.equal(wrongAnnouncedPort('metrics listening on :9090\nlistening on :8080\n', 8080), undefined);
  assert.equal(wrongAnnouncedPort('listening on :8080\nadmin listening on :9000\n', 8080), undefined);
  assert.equal(wrongAnnouncedPort('starting…\n', 8080), undefined);
});
