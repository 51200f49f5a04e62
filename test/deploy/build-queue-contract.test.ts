// Contract of the BuildQueue port: this process's queue over the fair scheduler, and (with SLIPWAY_TEST_DATABASE_URL) the queue two PostgreSQL instances share.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { LocalBuildQueue, type BuildQueue, type QueuedBuild } from '../../src/deploy/build-queue.js';
import { FairBuildSlots } from '../../src/deploy/fair-build-slots.js';
import { databaseBuildQueue, type DatabaseBuildQueue } from '../../src/db/build-queue.js';
import { openDatabase, type Db } from '../../src/db/database.js';
import { pgCoordination } from '../../src/db/pg-coordination.js';
import type { Coordination } from '../../src/deploy/coordination.js';
import { testDatabase } from '../helpers/server.js';

const quiet = (): void => undefined;

interface Pair {
  /** Two instances on one queue (the same object for this process's queue). */
  readonly a: BuildQueue;
  readonly b: BuildQueue;
  close(): Promise<void>;
}

let ids = 0;
/** A build of `user`'s (each its own deployment unless `deploymentId` is given). */
const build = (user: string, deploymentId?: string): QueuedBuild => {
  ids += 1;
  return { buildId: `build-${process.pid}-${ids}`, deploymentId: deploymentId ?? `dep-${process.pid}-${ids}`, userId: `${user}-${process.pid}` };
};

/** Takes from `queue` until `want` (a build id) comes, or fails after a while (a change may take a poll to be seen). */
async function takeEventually(queue: BuildQueue, what: string): Promise<string> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const taken = await queue.take();
    if (taken !== undefined) return taken.buildId;
    if (Date.now() > deadline) throw new Error(`nothing to take: ${what}`);
    await sleep(50);
  }
}

function contract(name: string, open: (slots: number) => Promise<Pair>): void {
  describe(`BuildQueue contract: ${name}`, () => {
    it('takes the waiting build whose user has the fewest running, in queue order per user, and keeps the last free slot for a user with none running', async () => {
      const { a, close } = await open(2);
      try {
        const [a1, a2, a3, b1] = [build('alice'), build('alice'), build('alice'), build('bob')];
        for (const queued of [a1, a2, a3, b1]) await a.enqueue(queued);
        assert.equal((await a.take())?.buildId, a1.buildId);
        assert.equal((await a.take())?.buildId, b1.buildId, "bob's build takes the last slot, kept for a user with none running");
        assert.equal(await a.take(), undefined, 'no free slot');
        await a.release(a1.buildId);
        assert.equal(await takeEventually(a, 'a2'), a2.buildId);
        await a.release(b1.buildId);
        assert.equal(await a.take(), undefined, "alice has one running: the last slot stays free for a user with none");
        await a.release(a2.buildId);
        assert.equal(await takeEventually(a, 'a3'), a3.buildId);
        await a.release(a3.buildId);
        assert.equal(await a.take(), undefined, 'the queue is empty');
      } finally {
        await close();
      }
    });

    it("withdraws a deployment's waiting builds from any instance: they are never taken", async () => {
      const { a, b, close } = await open(1);
      try {
        const running = build('carol');
        const waiting = build('dave');
        await a.enqueue(running);
        await a.enqueue(waiting);
        assert.equal(await takeEventually(a, 'the first build'), running.buildId);
        assert.deepEqual(await b.withdraw(waiting.deploymentId), [waiting.buildId]);
        assert.deepEqual(await b.withdraw(waiting.deploymentId), [], 'withdrawn once');
        assert.deepEqual(await b.withdraw(running.deploymentId), [], 'a build taken is not withdrawn');
        await a.release(running.buildId);
        await sleep(100);
        assert.equal(await a.take(), undefined);
        assert.equal(await b.take(), undefined);
      } finally {
        await close();
      }
    });

    it('tells the instances a build can be taken, and the one that takes it learns which instance queued it', async () => {
      const { a, b, close } = await open(2);
      try {
        let told = 0;
        const stop = b.onChange(() => (told += 1));
        const queued = build('erin');
        await a.enqueue(queued);
        const deadline = Date.now() + 20_000;
        while (told === 0 && Date.now() < deadline) await sleep(20);
        stop();
        assert.ok(told > 0, 'told');
        const taken = await b.take();
        assert.equal(taken?.buildId, queued.buildId);
        assert.equal(taken?.userId, queued.userId);
        assert.equal(taken?.deploymentId, queued.deploymentId);
        if (a !== b) assert.notEqual(taken?.queuedBy, undefined, 'queued by another instance');
        await b.release(queued.buildId);
      } finally {
        await close();
      }
    });
  });
}

contract("this process's queue (one instance)", async (slots) => {
  const queue = new LocalBuildQueue(new FairBuildSlots(slots));
  return { a: queue, b: queue, close: async () => void (await queue.close()) };
});

describe('BuildQueue on PostgreSQL', async () => {
  const database = await testDatabase();
  after(async () => database?.drop());
  // The SQLite pass has no PostgreSQL: the PostgreSQL pass of scripts/test.mjs runs this part.
  if (database === undefined) return;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'slipway-queue-'));
  after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const db: Db = await openDatabase({ file: path.join(dir, 'unused.db'), url: database.url });
  after(async () => db.destroy());

  let instances = 0;
  /** Two instances, each with its coordination connection and `slots` slots; the queue emptied first. */
  const openPair = async (slots: number, affinityMs = 0): Promise<{ a: DatabaseBuildQueue; b: DatabaseBuildQueue; names: [string, string]; close: () => Promise<void> }> => {
    await db.deleteFrom('build_queue').execute();
    const coordinations: Coordination[] = [await pgCoordination({ url: database.url, log: quiet }), await pgCoordination({ url: database.url, log: quiet })];
    const names: [string, string] = [`instance-${(instances += 1)}`, `instance-${(instances += 1)}`];
    const a = await databaseBuildQueue(db, { self: names[0], slots, coordination: coordinations[0] as Coordination, pollMs: 500, affinityMs });
    const b = await databaseBuildQueue(db, { self: names[1], slots, coordination: coordinations[1] as Coordination, pollMs: 500, affinityMs });
    return {
      a,
      b,
      names,
      close: async () => {
        await Promise.all([a.close(), b.close()]);
        await Promise.all(coordinations.map((c) => c.close()));
      },
    };
  };
  contract('in the database (two PostgreSQL instances)', (slots) => openPair(slots));

  it('leaves a build to the instance it was queued through for a moment, then any instance takes it', async () => {
    const { a, b, close } = await openPair(2, 1500);
    try {
      const [mine, left] = [build('ivan'), build('judy')];
      await a.enqueue(mine);
      assert.equal(await b.take(), undefined, 'not yet for another instance');
      assert.equal((await a.take())?.buildId, mine.buildId, 'its own instance takes it at once');
      await a.enqueue(left);
      assert.equal(await takeEventually(b, 'the build after the moment'), left.buildId);
    } finally {
      await close();
    }
  });

  it('two instances taking at once never take the same build', async () => {
    const { a, b, close } = await openPair(12);
    try {
      const queued = Array.from({ length: 24 }, (_, i) => build(`user${i % 4}`));
      for (const q of queued) await a.enqueue(q);
      const takeAll = async (queue: BuildQueue): Promise<string[]> => {
        const taken: string[] = [];
        for (let misses = 0; misses < 5; ) {
          const next = await queue.take();
          if (next === undefined) {
            misses += 1;
            await sleep(20);
          } else taken.push(next.buildId);
        }
        return taken;
      };
      const [x, y, z, w] = await Promise.all([takeAll(a), takeAll(b), takeAll(a), takeAll(b)]);
      // Then one at a time: what was skipped while locked by the other is taken now.
      const [restA, restB] = [await takeAll(a), await takeAll(b)];
      const fromA = [...x, ...z, ...restA];
      const fromB = [...y, ...w, ...restB];
      const all = [...fromA, ...fromB];
      assert.equal(new Set(all).size, all.length, `a build taken twice: ${all.join(' ')}`);
      assert.ok(fromA.length <= 12 && fromB.length <= 12, 'no instance takes more than its slots');
      // Each instance keeps its last slot for a user with none running (all four soon have one).
      assert.ok(all.length >= 22, `${all.length} of 24 taken with 24 slots`);
      assert.ok(fromA.length > 0 && fromB.length > 0, 'both instances took builds');
    } finally {
      await close();
    }
  });

  it('a build queued by an instance that is gone is taken by another', async () => {
    const { a, b, close } = await openPair(2);
    try {
      const queued = build('frank');
      await a.enqueue(queued);
      await a.close();
      const taken = await b.take();
      assert.equal(taken?.buildId, queued.buildId);
    } finally {
      await close();
    }
  });

  it("counts a user's running builds across instances, and frees the slots of a lost instance", async () => {
    const { a, b, names, close } = await openPair(2);
    try {
      const [u1, u2, v1] = [build('grace'), build('grace'), build('heidi')];
      await a.enqueue(u1);
      assert.equal((await a.take())?.buildId, u1.buildId);
      await b.enqueue(v1);
      assert.equal((await b.take())?.buildId, v1.buildId);
      await b.enqueue(u2);
      assert.equal(await b.take(), undefined, "b's last slot is kept: grace has a build running on a");
      await b.forgetLost([names[1]]);
      assert.equal((await b.take())?.buildId, u2.buildId, "a is lost: its slot is free, grace has none running");
    } finally {
      await close();
    }
  });
});
