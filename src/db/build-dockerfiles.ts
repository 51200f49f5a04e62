// The build_dockerfiles table: the Dockerfile each build used, written by the pipeline and read by the API.
import type { UsedDockerfile } from '../domain/used-dockerfile.js';
import type { Db } from './database.js';

/** Records (or, for a build run again, replaces) the Dockerfile a build uses. */
export async function recordBuildDockerfile(db: Db, buildId: string, used: UsedDockerfile): Promise<void> {
  const row = { path: used.path, dockerfile: used.dockerfile, generated: used.generated ? 1 : 0, detection: used.detection === null ? null : JSON.stringify(used.detection) };
  await db
    .insertInto('build_dockerfiles')
    .values({ build_id: buildId, ...row })
    .onConflict((oc) => oc.column('build_id').doUpdateSet(row))
    .execute();
}

/** The Dockerfile a build used, if it was recorded. */
export async function readBuildDockerfile(db: Db, buildId: string): Promise<UsedDockerfile | undefined> {
  const row = await db.selectFrom('build_dockerfiles').selectAll().where('build_id', '=', buildId).executeTakeFirst();
  if (row === undefined) return undefined;
  return { path: row.path, dockerfile: row.dockerfile, generated: row.generated === 1, detection: row.detection === null ? null : (JSON.parse(row.detection) as string[]) };
}
