// Unit tests of crash-loop tracking (episodes, the once-per-episode announcement), the words shown for it, and the app event emitter.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AppEvents, type AppCrashedEvent } from '../../src/domain/app-events.js';
import { CrashTracker, EPISODE_QUIET_MS, HEALTH_OK, healthSummary, type ReleaseExit } from '../../src/domain/app-health.js';

const exit = (at: number, code = 3): ReleaseExit => ({ key: `c@${at}`, exitCode: code, at });

test('two crashes are unhealthy, the third makes a crash loop announced once; a quiet spell ends the episode, and a new one is announced again', () => {
  const tracker = new CrashTracker();
  const t0 = Date.parse('2026-11-28T12:00:00Z');
  assert.equal(tracker.record('d', 'r1', [exit(t0), exit(t0 + 8_000)]), false);
  tracker.setLastLine('d', 'boom');
  assert.deepEqual(tracker.health('d', 'r1', t0 + 9_000), { state: 'unhealthy', restarts: 2, last_exit_code: 3, last_line: 'boom', since: '2026-11-28T12:00:00.000Z' });
  assert.equal(tracker.record('d', 'r1', [exit(t0 + 16_000)]), true, 'the third crash announces');
  assert.equal(tracker.record('d', 'r1', [exit(t0 + 24_000)]), false, 'not again in the same episode');
  assert.equal(tracker.health('d', 'r1', t0 + 25_000).state, 'crash_loop');
  assert.equal(tracker.health('d', 'r1', t0 + 25_000).restarts, 4);
  // Another release (a restart, a deploy) starts afresh; so does time without a crash.
  assert.deepEqual(tracker.health('d', 'r2', t0 + 25_000), HEALTH_OK);
  assert.deepEqual(tracker.health('d', 'r1', t0 + 24_000 + EPISODE_QUIET_MS + 1), HEALTH_OK);
  const later = t0 + 24_000 + EPISODE_QUIET_MS + 5_000;
  assert.equal(tracker.record('d', 'r1', [exit(later), exit(later + 1_000), exit(later + 2_000)]), true, 'a new episode is announced');
  tracker.keepOnly(new Map([['other', 'x']]));
  assert.deepEqual(tracker.health('d', 'r1', later + 3_000), HEALTH_OK, 'forgotten once not live');
});

test('the words: Crashed — restarting (exit 3: boom); nothing when ok', () => {
  assert.equal(healthSummary({ state: 'crash_loop', restarts: 4, last_exit_code: 3, last_line: 'boom', since: '2026-11-28T12:00:00.000Z' }), 'Crashed — restarting (exit 3: boom)');
  assert.equal(healthSummary({ state: 'crash_loop', restarts: 4, last_exit_code: 137, last_line: null, since: '2026-11-28T12:00:00.000Z' }), 'Crashed — restarting (exit 137)');
  assert.equal(healthSummary({ state: 'unhealthy', restarts: 1, last_exit_code: 1, last_line: 'oops', since: '2026-11-28T12:00:00.000Z' }), 'Restarted after a crash (exit 1: oops)');
  assert.equal(healthSummary(HEALTH_OK), '');
});

test('app events reach their subscribers in order; a throwing listener is reported and the others still run; unsubscribe works', () => {
  const errors: unknown[] = [];
  const events = new AppEvents((err) => errors.push(err));
  const seen: string[] = [];
  events.on('app.crashed', () => {
    throw new Error('listener failed');
  });
  const off = events.on('app.crashed', (e) => seen.push(`a:${e.subdomain}`));
  events.on('app.crashed', (e) => seen.push(`b:${e.subdomain}`));
  const event: AppCrashedEvent = { type: 'app.crashed', deploymentId: 'd', subdomain: 'hello', releaseId: 'r', since: '2026-11-28T12:00:00.000Z', restarts: 3, exitCode: 3, lastLine: 'boom' };
  events.emit(event);
  off();
  events.emit(event);
  assert.deepEqual(seen, ['a:hello', 'b:hello', 'b:hello']);
  assert.equal(errors.length, 2);
});
