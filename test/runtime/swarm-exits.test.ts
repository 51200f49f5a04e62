// Unit tests of a swarm release's crashes read from task history: which ended tasks are crashes, their exit codes, and whose release they are.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { exitCodeOf, historyWarning, releaseExitsOf, type ExitedTask } from '../../src/runtime/swarm/swarm-exits.js';

const t0 = Date.parse('2026-11-29T12:00:00Z');
/** A task of `release` in `state` at t0 + `after` ms, as GET /tasks answers it. */
const task = (id: string, release: string, state: string, after: number, status: { ExitCode?: number; Err?: string } = {}): ExitedTask => ({
  ID: id,
  ServiceID: 'svc',
  Spec: { ContainerSpec: { Labels: { 'dev.slipway.release': release } } },
  Status: {
    State: state,
    Timestamp: new Date(t0 + after).toISOString(),
    ...(status.Err === undefined ? {} : { Err: status.Err }),
    ContainerStatus: { ContainerID: `c-${id}`, ...(status.ExitCode === undefined ? {} : { ExitCode: status.ExitCode }) },
  },
});

test("the app's own ends are crashes (failed, complete), with their exit code; what swarm stopped or could not start is not", () => {
  assert.equal(exitCodeOf(task('a', 'r', 'failed', 0, { ExitCode: 3, Err: 'task: non-zero exit (3)' })), 3);
  assert.equal(exitCodeOf(task('b', 'r', 'failed', 0, { Err: 'task: non-zero exit (137)' })), 137, 'read from the error when ExitCode is absent');
  assert.equal(exitCodeOf(task('c', 'r', 'complete', 0)), 0, 'ExitCode is left out when zero');
  assert.equal(exitCodeOf(task('d', 'r', 'shutdown', 0, { ExitCode: 143 })), null, 'stopped by swarm (update, scale, drain)');
  assert.equal(exitCodeOf(task('e', 'r', 'rejected', 0, { Err: 'No such image' })), null, 'never ran');
  assert.equal(exitCodeOf(task('f', 'r', 'running', 0)), null);
  assert.equal(exitCodeOf(task('g', 'r', 'failed', 0, { Err: 'starting container failed: mount denied' })), null, 'no exit to report');
});

test("each release's exits in the window, oldest first, keyed by task; other releases' (a rolled-back update, another app) are left out", () => {
  const tasks = [
    task('t3', 'live1', 'failed', 16_000, { ExitCode: 3 }),
    task('t1', 'live1', 'failed', 0, { ExitCode: 3 }),
    task('t2', 'live1', 'failed', 8_000, { ExitCode: 3 }),
    task('t4', 'live1', 'running', 17_000),
    task('old', 'live1', 'failed', -60_000, { ExitCode: 3 }),
    task('new', 'rolledback', 'failed', 9_000, { ExitCode: 1 }),
    task('x1', 'live2', 'complete', 5_000),
    task('x2', 'live2', 'shutdown', 6_000, { ExitCode: 137 }),
  ];
  const exits = releaseExitsOf(tasks, ['svc1/live1', 'svc2/live2', 'svc3/quiet'], t0 - 5_000, t0 + 20_000);
  assert.deepEqual(exits.get('svc1/live1'), [
    { key: 't1', exitCode: 3, at: t0 },
    { key: 't2', exitCode: 3, at: t0 + 8_000 },
    { key: 't3', exitCode: 3, at: t0 + 16_000 },
  ]);
  assert.deepEqual(exits.get('svc2/live2'), [{ key: 'x1', exitCode: 0, at: t0 + 5_000 }]);
  assert.deepEqual([...exits.keys()].sort(), ['svc1/live1', 'svc2/live2']);
});

test('a swarm that keeps no task history is told; the default (5) and any other limit are not', () => {
  assert.match(historyWarning({ Spec: { Orchestration: { TaskHistoryRetentionLimit: 0 } } }) ?? '', /TaskHistoryRetentionLimit 0.*--task-history-limit/);
  assert.equal(historyWarning({ Spec: { Orchestration: { TaskHistoryRetentionLimit: 5 } } }), null);
  assert.equal(historyWarning({ Spec: { Orchestration: { TaskHistoryRetentionLimit: -1 } } }), null);
  assert.equal(historyWarning({}), null, 'unreadable: nothing said');
});
