// The webhook store on the database: secrets AES-256-GCM encrypted and bound to their deployment; deliveries bounded.
import { appendRecord } from './audit-log.js';
import type { Transaction } from 'kysely';
import { DEDUP_WINDOW_MS, KEEP_DELIVERIES, KEEP_REJECTED, type DeliveryRecord, type HookTarget, type WebhookStore } from '../domain/webhook-store.js';
import type { ValueCipher } from '../secrets/value-cipher.js';
import { isUniqueViolation, nowIso, type Db } from './database.js';
import type { Database } from './schema.js';

/** Associated data of a webhook secret: the ciphertext only opens for the deployment it was written for. */
export const webhookContext = (deploymentId: string): string => `webhook:${deploymentId}`;

const SHOWN = ['id', 'received_at', 'provider', 'event', 'delivery_id', 'ref', 'commit_sha', 'outcome', 'build_id', 'reason'] as const;

/** WebhookStore over the `webhooks` and `webhook_deliveries` tables. */
export function databaseWebhookStore(db: Db, cipher: ValueCipher): WebhookStore {
  return {
    async target(deploymentId): Promise<HookTarget | undefined> {
      const row = await db
        .selectFrom('webhooks')
        .innerJoin('deployments', 'deployments.id', 'webhooks.deployment_id')
        .select(['deployments.id', 'deployments.user_id', 'deployments.team_id', 'deployments.name', 'deployments.repo_url', 'deployments.branch', 'deployments.auto_deploy', 'deployments.previews', 'webhooks.secret'])
        .where('webhooks.deployment_id', '=', deploymentId)
        .executeTakeFirst();
      if (row === undefined) return undefined;
      return {
        deploymentId: row.id,
        userId: row.user_id,
        teamId: row.team_id,
        name: row.name,
        repoUrl: row.repo_url,
        branch: row.branch,
        autoDeploy: row.auto_deploy === 1,
        previews: row.previews === 1,
        secret: cipher.decrypt(row.secret, webhookContext(row.id)),
      };
    },

    async setSecret(deploymentId, secret, audit) {
      const row = { secret: cipher.encrypt(secret, webhookContext(deploymentId)), created_at: nowIso() };
      await db.transaction().execute(async (trx) => {
        await trx
          .insertInto('webhooks')
          .values({ deployment_id: deploymentId, ...row })
          .onConflict((oc) => oc.column('deployment_id').doUpdateSet(row))
          .execute();
        await appendRecord(trx, audit);
      });
      return row.created_at;
    },

    async createdAt(deploymentId) {
      const row = await db.selectFrom('webhooks').select('created_at').where('deployment_id', '=', deploymentId).executeTakeFirst();
      return row?.created_at;
    },

    async record(deploymentId, delivery, dedupKey) {
      try {
        await db.transaction().execute(async (trx) => {
          if (dedupKey !== undefined) {
            // A delivery id stops blocking once its window has passed.
            const since = new Date(Date.now() - DEDUP_WINDOW_MS).toISOString();
            await trx
              .updateTable('webhook_deliveries')
              .set({ dedup_key: null })
              .where('deployment_id', '=', deploymentId)
              .where('dedup_key', '=', dedupKey)
              .where('received_at', '<', since)
              .execute();
          }
          // The unique (deployment_id, dedup_key) index decides: two copies arriving at once cannot both insert.
          await trx
            .insertInto('webhook_deliveries')
            .values({ ...delivery, deployment_id: deploymentId, dedup_key: dedupKey ?? null })
            .execute();
          await prune(trx, deploymentId);
        });
      } catch (err) {
        if (dedupKey !== undefined && isUniqueViolation(err)) return 'duplicate';
        throw err;
      }
      return 'recorded';
    },

    async settle(id, change) {
      await db
        .updateTable('webhook_deliveries')
        .set({
          outcome: change.outcome,
          reason: change.reason,
          build_id: change.buildId,
          ...(change.releaseKey ? { dedup_key: null } : {}),
        })
        .where('id', '=', id)
        .execute();
    },

    async lastDeployed(deploymentId) {
      return db
        .selectFrom('webhook_deliveries')
        .select(['delivery_id', 'commit_sha', 'build_id'])
        .where('deployment_id', '=', deploymentId)
        .where('outcome', '=', 'deployed')
        // Pushes only: a preview's build (refs/pull/…) is not what the tracked branch last deployed.
        .where('ref', 'like', 'refs/heads/%')
        .orderBy('seq', 'desc')
        .limit(1)
        .executeTakeFirst();
    },

    async claimedBuild(deploymentId, dedupKey) {
      const row = await db
        .selectFrom('webhook_deliveries')
        .select('build_id')
        .where('deployment_id', '=', deploymentId)
        .where('dedup_key', '=', dedupKey)
        .executeTakeFirst();
      return row?.build_id ?? null;
    },

    async deliveries(deploymentId): Promise<DeliveryRecord[]> {
      return db
        .selectFrom('webhook_deliveries')
        .select(SHOWN)
        .where('deployment_id', '=', deploymentId)
        .orderBy('seq', 'desc')
        .limit(KEEP_DELIVERIES)
        .execute();
    },
  };
}

/**
 * Keeps the newest KEEP_DELIVERIES accepted and KEEP_REJECTED rejected deliveries of a deployment
 * (so forged deliveries cannot push the real ones out), and any older one whose id still blocks a repeat.
 */
async function prune(trx: Transaction<Database>, deploymentId: string): Promise<void> {
  for (const [rejected, keep] of [
    [false, KEEP_DELIVERIES],
    [true, KEEP_REJECTED],
  ] as const) {
    const op = rejected ? '=' : '!=';
    const oldestKept = await trx
      .selectFrom('webhook_deliveries')
      .select('seq')
      .where('deployment_id', '=', deploymentId)
      .where('outcome', op, 'rejected')
      .orderBy('seq', 'desc')
      .offset(keep - 1)
      .limit(1)
      .executeTakeFirst();
    if (oldestKept === undefined) continue;
    await trx
      .deleteFrom('webhook_deliveries')
      .where('deployment_id', '=', deploymentId)
      .where('outcome', op, 'rejected')
      .where('seq', '<', oldestKept.seq)
      .where('dedup_key', 'is', null)
      .execute();
  }
}

/** Re-encrypts every webhook secret from one key to the other inside `trx` (key rotation); returns the count. */
export async function reencryptWebhooks(trx: Transaction<Database>, from: ValueCipher, to: ValueCipher): Promise<number> {
  const rows = await trx.selectFrom('webhooks').select(['deployment_id', 'secret']).execute();
  for (const r of rows) {
    const context = webhookContext(r.deployment_id);
    await trx.updateTable('webhooks').set({ secret: to.encrypt(from.decrypt(r.secret, context), context) }).where('deployment_id', '=', r.deployment_id).execute();
  }
  return rows.length;
}
