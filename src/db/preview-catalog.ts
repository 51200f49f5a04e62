// The preview catalog over the database: previews are deployment rows with a parent, created with their subdomain claim under the parent's row lock.
import { appendRecord } from './audit-log.js';
import type { PreviewCatalog } from '../domain/previews.js';
import { isUniqueViolation, nowIso, type Db } from './database.js';
import { bumpListVersion, lockDeployment } from './deployment-store.js';

export function databasePreviewCatalog(db: Db): PreviewCatalog {
  return {
    list: (parentId) => db.selectFrom('deployments').selectAll().where('parent_id', '=', parentId).orderBy('seq', 'desc').execute(),

    find: (parentId, number) =>
      db.selectFrom('deployments').selectAll().where('parent_id', '=', parentId).where('pr_number', '=', number).executeTakeFirst(),

    async create(preview, max, audit) {
      const parentId = preview.parent_id;
      if (parentId === null || parentId === undefined) throw new Error('a preview needs its deployment');
      try {
        return await db.transaction().execute(async (trx) => {
          await bumpListVersion(trx, { userId: preview.user_id });
          // The parent's row lock orders concurrent creates: the count below is then exact.
          if (!(await lockDeployment(trx, parentId))) return 'gone' as const;
          const siblings = await trx.selectFrom('deployments').select(['pr_number']).where('parent_id', '=', parentId).execute();
          if (siblings.some((s) => s.pr_number === preview.pr_number)) return 'exists' as const;
          if (siblings.length >= max) return 'limit' as const;
          const claimed = await trx.selectFrom('subdomain_claims').select('subdomain').where('subdomain', '=', preview.subdomain).executeTakeFirst();
          if (claimed !== undefined) return 'subdomain_taken' as const;
          // The claim's primary key decides between this and a concurrent deployment or tunnel.
          await trx
            .insertInto('subdomain_claims')
            .values({ subdomain: preview.subdomain, kind: 'deployment', owner_id: preview.id, user_id: preview.user_id, created_at: preview.created_at })
            .execute();
          await trx.insertInto('deployments').values(preview).execute();
          await appendRecord(trx, audit);
          return 'created' as const;
        });
      } catch (err) {
        if (!isUniqueViolation(err)) throw err;
        // Either the subdomain was claimed meanwhile, or the same number's preview was created meanwhile.
        const existing = await db.selectFrom('deployments').select('id').where('parent_id', '=', parentId).where('pr_number', '=', preview.pr_number ?? 0).executeTakeFirst();
        return existing === undefined ? 'subdomain_taken' : 'exists';
      }
    },

    async update(previewId, head, settings) {
      await db
        .updateTable('deployments')
        .set({
          branch: head.branch,
          pr_head_sha: head.sha,
          pr_head_repo: head.headRepo,
          pr_same_repo: head.sameRepo ? 1 : 0,
          repo_url: settings.repo_url,
          dockerfile_path: settings.dockerfile_path,
          compose_path: settings.compose_path ?? null,
          health_check_path: settings.health_check_path,
          memory_bytes: settings.memory_bytes,
          nano_cpus: settings.nano_cpus,
          updated_at: nowIso(),
        })
        .where('id', '=', previewId)
        .where('parent_id', 'is not', null)
        .execute();
    },
  };
}
