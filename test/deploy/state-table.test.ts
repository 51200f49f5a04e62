// Unit tests of the state table (decisions §4), row by row: every status against every operation.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { DomainError } from '../../src/core/errors.js';
import { transition, type DeploymentEvent, type DeploymentStatus, type TransitionFacts } from '../../src/deploy/state-table.js';

const none: TransitionFacts = { serving: false, restartable: false };
const serving: TransitionFacts = { serving: true, restartable: true };

/** The cell's outcome: the status moved to, 'no-op', or the 409's message. */
function cell(from: DeploymentStatus, event: DeploymentEvent, facts: TransitionFacts): string {
  try {
    const result = transition(from, event, facts);
    return result.noop ? `no-op (${result.to})` : result.to;
  } catch (err) {
    assert.ok(err instanceof DomainError && err.code === 'invalid_state', String(err));
    return `409: ${err.message}`;
  }
}

// Each row: [event, facts, expected outcome]. "–" cells of the table (a build cannot finish when
// none is building) leave the status as it is.
const table: Record<DeploymentStatus, Array<[DeploymentEvent, TransitionFacts, string]>> = {
  pending: [
    ['deploy', none, 'building'],
    ['build_succeeded', none, 'no-op (pending)'],
    ['build_failed', none, 'no-op (pending)'],
    ['stop', serving, '409: the deployment has never been deployed'],
    ['restart', serving, '409: the deployment has never been deployed'],
    ['rollback', serving, '409: the deployment has never been deployed; there is no build to roll back to'],
  ],
  building: [
    ['deploy', none, 'building'],
    ['build_succeeded', none, 'running'],
    ['build_failed', none, 'failed'],
    ['stop', none, 'stopped'],
    ['restart', serving, '409: a build is in progress; wait for it or stop it'],
    ['rollback', none, 'running'],
  ],
  running: [
    ['deploy', serving, 'building'],
    ['build_succeeded', serving, 'no-op (running)'],
    ['build_failed', serving, 'no-op (running)'],
    ['stop', serving, 'stopped'],
    ['restart', serving, 'running'],
    ['rollback', serving, 'running'],
  ],
  stopped: [
    ['deploy', none, 'building'],
    ['build_succeeded', none, 'no-op (stopped)'],
    ['build_failed', none, 'no-op (stopped)'],
    ['stop', none, 'no-op (stopped)'],
    ['restart', { serving: false, restartable: true }, 'running'],
    ['rollback', none, 'running'],
  ],
  failed: [
    ['deploy', none, 'building'],
    ['build_succeeded', none, 'no-op (failed)'],
    ['build_failed', none, 'no-op (failed)'],
    ['stop', serving, 'stopped'],
    ['stop', none, '409: no container is serving this deployment'],
    ['restart', { serving: true, restartable: true }, 'running'],
    ['restart', none, '409: no succeeded build to restart; deploy first'],
    ['rollback', none, 'running'],
  ],
};

describe('the state table of decisions §4', () => {
  for (const [from, row] of Object.entries(table) as Array<[DeploymentStatus, Array<[DeploymentEvent, TransitionFacts, string]>]>) {
    test(`from ${from}`, () => {
      for (const [event, facts, expected] of row) {
        assert.equal(cell(from, event, facts), expected, `${from} × ${event} (${JSON.stringify(facts)})`);
      }
    });
  }

  test('restart needs a build that can be started again, in every status that allows it', () => {
    for (const from of ['running', 'stopped', 'failed'] as const) {
      assert.equal(cell(from, 'restart', none), '409: no succeeded build to restart; deploy first', from);
    }
  });

  test('cancel (beyond §4): the build in flight stops; what served serves on, else the app is stopped', () => {
    assert.equal(cell('building', 'cancel', serving), 'running');
    assert.equal(cell('building', 'cancel', none), 'stopped');
    for (const from of ['pending', 'running', 'stopped', 'failed'] as const) assert.equal(cell(from, 'cancel', serving), '409: no build is in progress');
  });

  test('start-up recovery: a lost release fails the deployment whatever it was', () => {
    for (const from of ['pending', 'running', 'stopped', 'failed'] as const) assert.equal(cell(from, 'release_lost', none), 'failed');
  });

  test('every status answers every event (the table has no hole)', () => {
    const events: DeploymentEvent[] = ['deploy', 'build_succeeded', 'build_failed', 'stop', 'restart', 'rollback', 'cancel', 'release_lost'];
    for (const from of Object.keys(table) as DeploymentStatus[]) {
      for (const event of events) assert.match(cell(from, event, serving), /^(pending|building|running|stopped|failed|no-op|409)/);
    }
  });
});
