// Contract of the Coordination port, against the in-memory implementation and (with SLIPWAY_TEST_DATABASE_URL) PostgreSQL.
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import type { Coordination } from '../../src/deploy/coordination.js';
import { memoryCoordination } from '../../src/deploy/memory-coordination.js';
import { pgCoordination } from '../../src/db/pg-coordination.js';
import { testDatabase } from '../helpers/server.js';

const quiet = (): void => undefined;

/** Polls `check` every 50 ms until it holds, failing after `timeoutMs`. */
async function eventually(check: () => boolean | Promise<boolean>, what: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

interface Peers {
  /** Two instances on one backing store (the same object for the single-instance implementation). */
  readonly a: Coordination;
  readonly b: Coordination;
  close(): Promise<void>;
}

function contract(name: string, open: () => Promise<Peers>): void {
  describe(`Coordination contract: ${name}`, () => {
    it('serializes holders of one deployment across instances, and leaves other deployments free', async () => {
      const peers = await open();
      try {
        const releaseA = await peers.a.lockDeployment('dep-1');
        let bHolds = false;
        const waitingB = peers.b.lockDeployment('dep-1').then((release) => {
          bHolds = true;
          return release;
        });
        // Another deployment is not held up.
        const other = await peers.b.lockDeployment('dep-2');
        other();
        await sleep(200);
        assert.equal(bHolds, false, 'b waits while a holds dep-1');
        releaseA();
        const releaseB = await waitingB;
        assert.equal(bHolds, true);
        releaseB();
        // Released: it can be taken again at once.
        (await peers.a.lockDeployment('dep-1'))();
      } finally {
        await peers.close();
      }
    });

    it("serializes a host's certificate work across instances; host and deployment locks are apart", async () => {
      const peers = await open();
      try {
        const releaseA = await peers.a.lockHost('app.example.com');
        let bHolds = false;
        const waitingB = peers.b.lockHost('app.example.com', AbortSignal.timeout(20_000)).then((release) => {
          bHolds = true;
          return release;
        });
        (await peers.b.lockHost('other.example.com'))();
        (await peers.b.lockDeployment('app.example.com'))();
        await sleep(400);
        assert.equal(bHolds, false, 'b waits while a holds the host');
        releaseA();
        (await waitingB)();
        assert.equal(bHolds, true);
      } finally {
        await peers.close();
      }
    });

    it('gives up a wait when its signal aborts, holding nothing', async () => {
      const peers = await open();
      try {
        const release = await peers.a.lockDeployment('dep-3');
        const controller = new AbortController();
        const waiting = peers.b.lockDeployment('dep-3', controller.signal);
        controller.abort(new Error('given up'));
        await assert.rejects(waiting, /given up/);
        release();
        (await peers.b.lockDeployment('dep-3', AbortSignal.timeout(20_000)))();
      } finally {
        await peers.close();
      }
    });

    it('tells announced ids to every instance', async () => {
      const peers = await open();
      try {
        const heard: string[] = [];
        peers.b.onAnnounce((id) => {
          if (id !== null) heard.push(id);
        });
        peers.a.announce('x d:dep-4');
        await eventually(() => heard.includes('x d:dep-4'), 'the announcement');
      } finally {
        await peers.close();
      }
    });

    it('has exactly one leader among its instances, and reports no problem while connected', async () => {
      const peers = await open();
      try {
        await eventually(() => peers.a.isLeader() || peers.b.isLeader(), 'a leader');
        const distinct = peers.a !== peers.b;
        if (distinct) assert.notEqual(peers.a.isLeader(), peers.b.isLeader(), 'never two leaders');
        assert.equal(peers.a.problem(), undefined);
        const told: boolean[] = [];
        peers.a.onLeadership((leader) => told.push(leader));
        assert.deepEqual(told, [peers.a.isLeader()], 'a listener is told the current state at once');
      } finally {
        await peers.close();
      }
    });
  });
}

contract('in memory (one instance)', async () => {
  const one = memoryCoordination();
  return { a: one, b: one, close: () => one.close() };
});

describe('Coordination on PostgreSQL', async () => {
  const database = await testDatabase();
  after(async () => database?.drop());
  // The SQLite pass has no PostgreSQL: the PostgreSQL pass of scripts/test.mjs runs this part.
  if (database === undefined) return;
  const url = database.url;
  const open = async (): Promise<Peers> => {
    const a = await pgCoordination({ url, log: quiet, pollMs: 200 });
    const b = await pgCoordination({ url, log: quiet, pollMs: 200 });
    return { a, b, close: async () => void (await Promise.all([a.close(), b.close()])) };
  };
  contract('PostgreSQL (two instances)', open);

  /** Ends every coordination session in the test database (as a crash or a network cut would). */
  const terminateOthers = async (): Promise<void> => {
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    try {
      await admin.query('select pg_terminate_backend(pid) from pg_stat_activity where datname = current_database() and application_name = $1', ['slipway-coordination']);
    } finally {
      await admin.end();
    }
  };

  it('hands leadership over when the leader closes', async () => {
    const peers = await open();
    try {
      await eventually(() => peers.a.isLeader() || peers.b.isLeader(), 'a leader');
      const [leader, follower] = peers.a.isLeader() ? [peers.a, peers.b] : [peers.b, peers.a];
      await leader.close();
      await eventually(() => follower.isLeader(), 'the takeover');
    } finally {
      await peers.close();
    }
  });

  it('treats a lost connection as lost leadership and locks, reconnects, and asks for a resync', async () => {
    const a = await pgCoordination({ url, log: quiet, pollMs: 200 });
    try {
      await eventually(() => a.isLeader(), 'leadership');
      const release = await a.lockDeployment('dep-5');
      let resyncs = 0;
      a.onAnnounce((id) => {
        if (id === null) resyncs += 1;
      });
      const lostLeadership = new Promise<void>((resolve) => a.onLeadership((leader) => (leader ? undefined : resolve())));
      await terminateOthers();
      await lostLeadership;
      await eventually(() => resyncs > 0 && a.problem() === undefined, 'the reconnect and its resync');
      // The lock went with the session: another instance takes it although `release` was never called.
      const b = await pgCoordination({ url, log: quiet, pollMs: 200 });
      try {
        (await b.lockDeployment('dep-5', AbortSignal.timeout(20_000)))();
      } finally {
        await b.close();
      }
      release();
      await eventually(() => a.isLeader(), 'leadership again');
    } finally {
      await a.close();
    }
  });

  it('refuses a lock with 503-coded `unavailable` while the database cannot be reached', async () => {
    const dead = new URL(url);
    dead.port = '1';
    const a = await pgCoordination({ url: dead.href, log: quiet, pollMs: 200 });
    try {
      assert.match(a.problem() ?? '', /unreachable/);
      assert.equal(a.isLeader(), false);
      await assert.rejects(a.lockDeployment('dep-6'), (err: { code?: string }) => err.code === 'unavailable');
    } finally {
      await a.close();
    }
  });
});
