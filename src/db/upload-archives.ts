// Uploaded archives in the database, in 1 MiB chunks (streamed both ways, never whole in memory): any instance can build an upload.
import fs from 'node:fs';
import type { SharedUploads } from '../domain/uploads.js';
import type { Db } from './database.js';

const CHUNK_BYTES = 1024 * 1024;

/** The uploads every instance sharing `db` can read. */
export function databaseSharedUploads(db: Db): SharedUploads {
  return {
    async save(deploymentId, uploadId, archiveFile, dockerfile) {
      let size = 0;
      await db.insertInto('upload_archives').values({ upload_id: uploadId, deployment_id: deploymentId, dockerfile: dockerfile ?? null, size: 0 }).execute();
      try {
        let seq = 0;
        for await (const chunk of fs.createReadStream(archiveFile, { highWaterMark: CHUNK_BYTES })) {
          const data = chunk as Buffer;
          await db.insertInto('upload_chunks').values({ upload_id: uploadId, seq: seq++, data }).execute();
          size += data.length;
        }
        await db.updateTable('upload_archives').set({ size }).where('upload_id', '=', uploadId).execute();
      } catch (err) {
        await db.deleteFrom('upload_archives').where('upload_id', '=', uploadId).execute().catch(() => undefined);
        throw err;
      }
    },
    async load(uploadId, file, signal) {
      const row = await db.selectFrom('upload_archives').select(['dockerfile', 'size']).where('upload_id', '=', uploadId).executeTakeFirst();
      if (row === undefined) return undefined;
      const out = fs.createWriteStream(file, { mode: 0o600 });
      try {
        // One chunk per query: memory stays at one chunk whatever the archive's size.
        for (let seq = 0; ; seq++) {
          signal?.throwIfAborted();
          const chunk = await db.selectFrom('upload_chunks').select('data').where('upload_id', '=', uploadId).where('seq', '=', seq).executeTakeFirst();
          if (chunk === undefined) break;
          if (!out.write(chunk.data)) await new Promise<void>((resolve) => out.once('drain', () => resolve()));
        }
      } finally {
        await new Promise<void>((resolve, reject) => out.end((err?: Error | null) => (err ? reject(err) : resolve())));
      }
      return { dockerfile: row.dockerfile };
    },
    async prune(deploymentId, keep) {
      const rows = await db.selectFrom('upload_archives').select('upload_id').where('deployment_id', '=', deploymentId).execute();
      const gone = rows.map((r) => r.upload_id).filter((id) => !keep.has(id));
      if (gone.length > 0) await db.deleteFrom('upload_archives').where('upload_id', 'in', gone).execute();
    },
  };
}
