// Background work: every-instance tasks run everywhere, leader-only tasks follow leadership, stop ends everything.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { Background, watcherTask, type BackgroundTask, type Leadership } from '../../src/core/background.js';
import { memoryCoordination } from '../../src/deploy/memory-coordination.js';

/** Several instances' leaderships over one election: `elect(i)` makes instance i the leader (-1: none). */
function fakeElection(count: number): { instances: Leadership[]; elect(index: number): void } {
  let leader = -1;
  const listeners = Array.from({ length: count }, () => new Set<(leader: boolean) => void>());
  const instances = listeners.map((set, index): Leadership => ({
    isLeader: () => leader === index,
    onLeadership: (listener) => {
      set.add(listener);
      listener(leader === index);
      return () => set.delete(listener);
    },
  }));
  return {
    instances,
    elect(index) {
      const previous = leader;
      leader = index;
      if (previous !== -1 && previous !== index) for (const l of listeners[previous] ?? []) l(false);
      if (index !== -1 && previous !== index) for (const l of listeners[index] ?? []) l(true);
    },
  };
}

const quiet = (): void => undefined;

async function until(check: () => boolean, what: string, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await sleep(5);
  }
}

/** A counting interval task, with the signals of its rounds. */
function counting(name: string, scope: BackgroundTask['scope']): BackgroundTask & { runs: number; signals: AbortSignal[] } {
  const task = {
    name,
    scope,
    everyMs: 5,
    runs: 0,
    signals: [] as AbortSignal[],
    run(signal: AbortSignal): void {
      task.runs++;
      task.signals.push(signal);
    },
  };
  return task;
}

test('a leader-only task runs on the leader alone and moves when leadership does; every-instance tasks run on both', async () => {
  const election = fakeElection(2);
  const [a, b] = [new Background(election.instances[0]!, quiet), new Background(election.instances[1]!, quiet)];
  const onA = { leader: counting('chore', 'leaderOnly'), everywhere: counting('beat', 'everyInstance') };
  const onB = { leader: counting('chore', 'leaderOnly'), everywhere: counting('beat', 'everyInstance') };
  a.add(onA.leader);
  a.add(onA.everywhere);
  b.add(onB.leader);
  b.add(onB.everywhere);
  election.elect(0);
  a.start();
  b.start();
  try {
    await until(() => onA.leader.runs >= 3 && onA.everywhere.runs >= 3 && onB.everywhere.runs >= 3, 'the first rounds');
    assert.equal(onB.leader.runs, 0, 'a follower never runs a leader-only task');
    assert.deepEqual(a.runningNames().sort(), ['beat', 'chore']);
    assert.deepEqual(b.runningNames(), ['beat']);

    election.elect(1);
    assert.ok(onA.leader.signals.every((s) => s.aborted), 'losing leadership aborts the task at once');
    const stoppedAt = onA.leader.runs;
    await until(() => onB.leader.runs >= 3, 'the task on the new leader');
    assert.equal(onA.leader.runs, stoppedAt, 'the old leader runs it no more');
    assert.deepEqual(a.runningNames(), ['beat']);
    assert.deepEqual(b.runningNames().sort(), ['beat', 'chore']);

    election.elect(-1);
    assert.deepEqual(b.runningNames(), ['beat'], 'no leader: the task runs nowhere');
  } finally {
    await Promise.all([a.stop(), b.stop()]);
  }
});

test('stop aborts every signal, clears every timer, waits for rounds in flight, and nothing runs after', async () => {
  const background = new Background(memoryCoordination(), quiet);
  const interval = counting('interval', 'everyInstance');
  const leaderOnly = counting('leader', 'leaderOnly');
  let watcherStopped = 0;
  let slowEnded = false;
  background.add(interval);
  background.add(leaderOnly);
  background.add(watcherTask('watcher', 'everyInstance', () => () => watcherStopped++));
  background.add({
    name: 'slow',
    scope: 'everyInstance',
    everyMs: 1000,
    immediately: true,
    run: async (signal) => {
      await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
      await sleep(20);
      slowEnded = true;
    },
  });
  background.start();
  // Always the leader with one instance (the memory coordination).
  await until(() => interval.runs >= 2 && leaderOnly.runs >= 2, 'both tasks');
  await background.stop();
  assert.ok(slowEnded, 'stop waits for the round in flight');
  assert.equal(watcherStopped, 1, "a watcher's own stop is called once");
  assert.ok([...interval.signals, ...leaderOnly.signals].every((s) => s.aborted));
  assert.deepEqual(background.runningNames(), []);
  const after = interval.runs + leaderOnly.runs;
  await sleep(30);
  assert.equal(interval.runs + leaderOnly.runs, after, 'no round after stop');
  background.add(counting('late', 'everyInstance'));
  assert.deepEqual(background.runningNames(), [], 'a task added after stop never starts');
});

test('a failing round is logged with the task name and the task keeps its schedule; rounds never overlap', async () => {
  const logged: string[] = [];
  const background = new Background(memoryCoordination(), (_level, msg) => logged.push(msg));
  let runs = 0;
  let inFlight = 0;
  let overlapped = false;
  background.add({
    name: 'syncing things',
    scope: 'everyInstance',
    everyMs: 2,
    run: async () => {
      runs++;
      inFlight++;
      if (inFlight > 1) overlapped = true;
      await sleep(10);
      inFlight--;
      throw new Error('boom');
    },
  });
  background.start();
  try {
    await until(() => runs >= 3, 'three rounds');
  } finally {
    await background.stop();
  }
  assert.ok(logged.includes('syncing things failed'));
  assert.equal(overlapped, false);
});

test('a task added after start starts at once, in its scope', async () => {
  const election = fakeElection(1);
  const background = new Background(election.instances[0]!, quiet);
  background.start();
  try {
    const leaderOnly = counting('leader', 'leaderOnly');
    background.add(leaderOnly);
    background.add(counting('beat', 'everyInstance'));
    assert.deepEqual(background.runningNames(), ['beat']);
    election.elect(0);
    await until(() => leaderOnly.runs >= 1, 'the leader-only task once leading');
  } finally {
    await background.stop();
  }
});
