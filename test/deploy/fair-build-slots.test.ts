// Unit tests of the fair build scheduler: fewest running first, FIFO within a user, the last slot kept for a newcomer, aborts.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Release } from '../../src/deploy/concurrency.js';
import { FairBuildSlots } from '../../src/deploy/fair-build-slots.js';

/** A fake build queue over the scheduler: each build records when it got its slot and holds it until finished. */
function fakeBuilds(slots: FairBuildSlots) {
  const started: string[] = [];
  const releases = new Map<string, Release>();
  const pending = new Map<string, Promise<void>>();
  return {
    started,
    /** Queues build `name` of `user`. */
    queue(user: string, name: string, signal?: AbortSignal): Promise<void> {
      const done = slots.acquire(user, signal).then((release) => {
        started.push(name);
        releases.set(name, release);
      });
      pending.set(name, done);
      return done;
    },
    /** Ends build `name` (it must have started). */
    finish(name: string): void {
      const release = releases.get(name);
      assert.ok(release !== undefined, `${name} is not running`);
      release();
    },
  };
}

/** Lets granted acquisitions settle. */
const settle = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

test('a flood by one user leaves the last slot to another user, who starts at once', async () => {
  const slots = new FairBuildSlots(2);
  const builds = fakeBuilds(slots);
  for (const name of ['a1', 'a2', 'a3', 'a4']) void builds.queue('alice', name);
  await settle();
  assert.deepEqual(builds.started, ['a1'], 'alice alone holds one of two slots; the other is kept');
  void builds.queue('bob', 'b1');
  await settle();
  assert.deepEqual(builds.started, ['a1', 'b1'], "bob starts without waiting for alice's builds");
  assert.deepEqual([...slots.running()].sort(), [['alice', 1], ['bob', 1]]);
  assert.equal(slots.waiting, 3);
  builds.finish('b1');
  await settle();
  assert.deepEqual(builds.started, ['a1', 'b1'], 'still one running for alice: the free slot stays kept');
  builds.finish('a1');
  await settle();
  assert.deepEqual(builds.started, ['a1', 'b1', 'a2'], 'FIFO within a user');
});

test('the next slot goes to the waiting user with the fewest running builds, ties to the longest waiting', async () => {
  const slots = new FairBuildSlots(4);
  const builds = fakeBuilds(slots);
  for (const name of ['a1', 'a2', 'a3', 'a4', 'a5']) void builds.queue('alice', name);
  await settle();
  assert.deepEqual(builds.started, ['a1', 'a2', 'a3']);
  void builds.queue('bob', 'b1');
  void builds.queue('bob', 'b2');
  void builds.queue('carol', 'c1');
  await settle();
  assert.deepEqual(builds.started, ['a1', 'a2', 'a3', 'b1'], 'bob takes the kept slot');
  builds.finish('a1');
  await settle();
  // carol (0 running) before bob (1) before alice (2), whoever queued first.
  assert.deepEqual(builds.started.slice(4), ['c1']);
  // Everyone has one running and one slot is free: it is kept for a user with none.
  builds.finish('a2');
  await settle();
  assert.deepEqual(builds.started.slice(5), []);
  builds.finish('b1');
  await settle();
  assert.deepEqual(builds.started.slice(5), ['b2'], 'bob, now with none running, before alice who queued first');
  builds.finish('a3');
  await settle();
  assert.deepEqual(builds.started.slice(6), ['a4']);
});

test('one slot: nothing is kept, FIFO among users with none running', async () => {
  const slots = new FairBuildSlots(1);
  const builds = fakeBuilds(slots);
  void builds.queue('alice', 'a1');
  void builds.queue('alice', 'a2');
  void builds.queue('bob', 'b1');
  await settle();
  assert.deepEqual(builds.started, ['a1']);
  builds.finish('a1');
  await settle();
  assert.deepEqual(builds.started, ['a1', 'a2'], 'both have none running: the longest waiting goes first');
  builds.finish('a2');
  await settle();
  assert.deepEqual(builds.started, ['a1', 'a2', 'b1']);
});

test('an aborted wait leaves the queue and gets the signal reason; releasing twice frees one slot', async () => {
  const slots = new FairBuildSlots(2);
  const builds = fakeBuilds(slots);
  await builds.queue('alice', 'a1');
  const controller = new AbortController();
  const waiting = builds.queue('alice', 'a2', controller.signal);
  await settle();
  assert.equal(slots.waiting, 1);
  controller.abort(new Error('cancelled'));
  await assert.rejects(waiting, /cancelled/);
  assert.equal(slots.waiting, 0);
  await assert.rejects(slots.acquire('bob', AbortSignal.abort(new Error('already'))), /already/);
  builds.finish('a1');
  builds.finish('a1');
  assert.deepEqual([...slots.running()], []);
  // Both slots are free again, and no more: alice gets one, bob the other, carol waits.
  await builds.queue('alice', 'a3');
  await builds.queue('bob', 'b1');
  void builds.queue('carol', 'c1');
  await settle();
  assert.deepEqual(builds.started, ['a1', 'a3', 'b1']);
  assert.equal(slots.waiting, 1);
});
