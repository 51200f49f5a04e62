// The deployments that were serving, with the commit each served: what a restored installation rebuilds at its next start (decisions §25).
import type { Db } from './database.js';

export interface ServedDeployment {
  readonly deployment_id: string;
  readonly user_id: string;
  readonly source_type: 'git' | 'archive';
  readonly branch: string | null;
  readonly commit_sha: string;
}

/** Every deployment with a live build that is neither stopped nor pending. */
export async function servedDeployments(db: Db): Promise<ServedDeployment[]> {
  const rows = await db
    .selectFrom('deployments as d')
    .innerJoin('builds as b', 'b.id', 'd.live_build_id')
    .select(['d.id', 'd.user_id', 'd.source_type', 'd.branch', 'b.commit_sha'])
    .where('d.status', 'not in', ['stopped', 'pending'])
    .execute();
  return rows.map((r) => ({ deployment_id: r.id, user_id: r.user_id, source_type: r.source_type, branch: r.branch, commit_sha: r.commit_sha }));
}
