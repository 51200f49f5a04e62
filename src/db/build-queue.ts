// The build queue in the database (several instances, decisions §15): the next build taken fairly with SELECT … FOR UPDATE SKIP LOCKED, so no build is taken twice.
import { sql } from 'kysely';
import type { BuildQueue, QueuedBuild, TakenBuild } from '../deploy/build-queue.js';
import type { Coordination } from '../deploy/coordination.js';
import { pickFair, reservedSlots } from '../deploy/fair-build-slots.js';
import { nowIso, type Db } from './database.js';

export interface DatabaseBuildQueueOptions {
  /** This instance's id (`taken_by`, `queued_by`). */
  readonly self: string;
  /** This instance's build slots (SLIPWAY_MAX_CONCURRENT_BUILDS). */
  readonly slots: number;
  /** Tells every instance the queue changed (`<instance> q:`), so one with a free slot looks. */
  readonly coordination: Pick<Coordination, 'announce' | 'onAnnounce'>;
  /** The queue is looked at this often when no announcement comes (default 2 s). */
  readonly pollMs?: number;
  /** How long a build is left to the instance it was queued through before others may take it (default 2 s). */
  readonly affinityMs?: number;
}

/** The waiting builds the fair rule chooses among at once (the oldest ones). */
const WINDOW = 200;

/** The shared queue, with what the leader needs besides: freeing the slots of instances gone. */
export interface DatabaseBuildQueue extends BuildQueue {
  /** Frees the slots held by instances not in `live` (their builds are taken over and queued again). */
  forgetLost(live: readonly string[]): Promise<void>;
}

/**
 * The queue every instance on `db` shares (PostgreSQL). A waiting build is a row with no `taken_by`;
 * an instance with a free slot takes the fairest one in a transaction that locks the waiting rows it
 * reads with `FOR UPDATE SKIP LOCKED` (another instance taking at the same moment skips them and
 * looks again at the next change), and marks it `taken_by` itself; the row goes when the slot is
 * freed. Users' running builds are counted across every instance. Slots this instance held before
 * it started again are freed now (recovery queues those builds again).
 */
export async function databaseBuildQueue(db: Db, options: DatabaseBuildQueueOptions): Promise<DatabaseBuildQueue> {
  const { self, coordination } = options;
  const slots = Math.max(1, Math.floor(options.slots));
  const reserve = reservedSlots(slots);
  const affinity = sql`make_interval(secs => ${(options.affinityMs ?? 2000) / 1000})`;
  await db.deleteFrom('build_queue').where('taken_by', '=', self).execute();
  const held = new Set<string>();
  const listeners = new Set<() => void>();
  const tell = (): void => {
    for (const listener of listeners) listener();
  };
  const changed = (): void => coordination.announce(`${self} q:`);
  const unsubscribe = coordination.onAnnounce((message) => {
    if (message === null || message.endsWith(' q:')) tell();
  });
  const timer = setInterval(tell, options.pollMs ?? 2000);
  timer.unref();

  const takeOne = async (): Promise<TakenBuild | undefined> => {
    if (held.size >= slots) return undefined;
    const taken = await db.transaction().execute(async (trx) => {
      const waiting = await trx
        .selectFrom('build_queue')
        .select(['seq', 'build_id', 'deployment_id', 'user_id', 'queued_by', 'lost_from'])
        .where('taken_by', 'is', null)
        // Its own instance first (it has the upload on disk, and answers ?wait=true at once); then anyone.
        .where((eb) => eb.or([eb('queued_by', '=', self), eb('queued_at', '<=', sql<Date>`now() - ${affinity}`)]))
        .orderBy('seq')
        .limit(WINDOW)
        .forUpdate()
        .skipLocked()
        .execute();
      if (waiting.length === 0) return undefined;
      const counts = await trx
        .selectFrom('build_queue')
        .select((eb) => ['user_id', eb.fn.countAll<number>().as('n')])
        .where('taken_by', 'is not', null)
        .groupBy('user_id')
        .execute();
      const running = new Map(counts.map((row) => [row.user_id, Number(row.n)]));
      const pick = pickFair(waiting.map((row) => ({ ...row, userId: row.user_id })), running, slots - held.size, reserve);
      if (pick === undefined) return undefined;
      await trx.updateTable('build_queue').set({ taken_by: self, taken_at: nowIso() }).where('seq', '=', pick.seq).execute();
      return pick;
    });
    if (taken === undefined) return undefined;
    held.add(taken.build_id);
    return {
      buildId: taken.build_id,
      deploymentId: taken.deployment_id,
      userId: taken.user_id,
      queuedBy: taken.queued_by,
      takenBy: self,
      ...(taken.lost_from === null ? {} : { lostFrom: taken.lost_from }),
    };
  };
  let taking: Promise<unknown> = Promise.resolve();

  return {
    async enqueue(build: QueuedBuild) {
      await db.transaction().execute(async (trx) => {
        await trx.deleteFrom('build_queue').where('build_id', '=', build.buildId).execute();
        await trx
          .insertInto('build_queue')
          .values({ build_id: build.buildId, deployment_id: build.deploymentId, user_id: build.userId, queued_by: self, lost_from: build.lostFrom ?? null, taken_by: null, taken_at: null })
          .execute();
      });
      held.delete(build.buildId);
      changed();
    },

    take(): Promise<TakenBuild | undefined> {
      // One take at a time here: the free slots counted are this instance's.
      const next = taking.then(takeOne);
      taking = next.catch(() => undefined);
      return next;
    },

    async release(buildId) {
      if (!held.delete(buildId)) return;
      await db.deleteFrom('build_queue').where('build_id', '=', buildId).where('taken_by', '=', self).execute();
      changed();
    },

    async withdraw(deploymentId) {
      const rows = await db.deleteFrom('build_queue').where('deployment_id', '=', deploymentId).where('taken_by', 'is', null).returning('build_id').execute();
      return rows.map((row) => row.build_id);
    },

    onChange(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },

    async forgetLost(live) {
      let query = db.deleteFrom('build_queue').where('taken_by', 'is not', null);
      if (live.length > 0) query = query.where('taken_by', 'not in', [...live]);
      const result = await query.executeTakeFirst();
      if (Number(result.numDeletedRows) > 0) changed();
    },

    async close() {
      clearInterval(timer);
      unsubscribe();
      listeners.clear();
      // Builds waiting here stay in the database: another instance takes them.
      return [];
    },
  };
}
