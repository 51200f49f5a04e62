// The instance registry on the database: one row per control-plane instance, refreshed by its heartbeat.
import type { Db } from './database.js';
import { DROPPED_AFTER_MS, LOST_AFTER_MS, type InstanceBeat, type InstanceRegistry, type InstanceView } from '../domain/instances.js';

/** The registry of the instances sharing `db`; one silent for `lostAfterMs` is lost. */
export function databaseInstanceRegistry(db: Db, lostAfterMs = LOST_AFTER_MS): InstanceRegistry {
  const since = (now: Date, ms: number): string => new Date(now.getTime() - ms).toISOString();
  return {
    async heartbeat(beat: InstanceBeat): Promise<void> {
      const values = {
        url: beat.url,
        version: beat.version,
        started_at: beat.startedAt,
        last_seen_at: new Date().toISOString(),
        leader: beat.leader ? 1 : 0,
        builds_running: beat.buildsRunning,
      };
      await db
        .insertInto('instances')
        .values({ id: beat.id, ...values })
        .onConflict((oc) => oc.column('id').doUpdateSet(values))
        .execute();
      // One leader at a time holds the leadership lock: a flag another instance left (it died leading) is stale.
      if (beat.leader) await db.updateTable('instances').set({ leader: 0 }).where('id', '<>', beat.id).where('leader', '=', 1).execute();
    },
    async list(now: Date): Promise<InstanceView[]> {
      const rows = await db
        .selectFrom('instances')
        .selectAll()
        .where('last_seen_at', '>=', since(now, DROPPED_AFTER_MS))
        .orderBy('started_at')
        .orderBy('id')
        .execute();
      const liveSince = since(now, lostAfterMs);
      return rows.map((row) => {
        const live = row.last_seen_at >= liveSince;
        return {
          id: row.id,
          url: row.url,
          version: row.version,
          state: live ? 'live' : 'lost',
          started_at: row.started_at,
          last_seen_at: row.last_seen_at,
          // A lost instance leads nothing, whatever it last reported.
          leader: live && row.leader === 1,
          builds_running: live ? row.builds_running : 0,
        };
      });
    },
    async liveUrls(now: Date): Promise<Map<string, string>> {
      const rows = await db.selectFrom('instances').select(['id', 'url']).where('last_seen_at', '>=', since(now, lostAfterMs)).execute();
      return new Map(rows.flatMap((row) => (row.url === null ? [] : [[row.id, row.url] as const])));
    },
    async liveIds(now: Date): Promise<string[]> {
      const rows = await db.selectFrom('instances').select('id').where('last_seen_at', '>=', since(now, lostAfterMs)).execute();
      return rows.map((row) => row.id);
    },
    async prune(now: Date): Promise<number> {
      const result = await db.deleteFrom('instances').where('last_seen_at', '<', since(now, DROPPED_AFTER_MS)).executeTakeFirst();
      return Number(result.numDeletedRows);
    },
  };
}
