// The configuration store on the database: every value AES-256-GCM encrypted, bound to its row.
import type { AuditRecord } from '../domain/audit.js';
import { appendRecord } from './audit-log.js';
import type { Transaction } from 'kysely';
import type { AppConfigStore, EnvChange, EnvVar } from '../domain/app-config.js';
import type { ValueCipher } from '../secrets/value-cipher.js';
import type { Db } from './database.js';
import { nowIso } from './database.js';
import type { Database } from './schema.js';
import { reencryptCertificates } from './certificate-store.js';
import { lockDeployment } from './deployment-store.js';
import { reencryptWebhooks } from './webhook-store.js';
import { reencryptDatabaseCredentials } from './managed-database-store.js';
import { reencryptDestinationSecrets } from './backup-store.js';

/** Associated data of a variable: a ciphertext only opens in the row it was written to. */
const varContext = (deploymentId: string, key: string): string => `env:${deploymentId}:${key}`;
/** Associated data of a build's recorded configuration. */
const buildContext = (buildId: string): string => `build:${buildId}`;

const byKey = (a: EnvVar, b: EnvVar): number => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0);

type Executor = Db | Transaction<Database>;

/** AppConfigStore over the `env_vars` and `build_configs` tables. */
export class DbAppConfigStore implements AppConfigStore {
  readonly #db: Db;
  readonly #cipher: ValueCipher;

  constructor(db: Db, cipher: ValueCipher) {
    this.#db = db;
    this.#cipher = cipher;
  }

  async current(deploymentId: string): Promise<EnvVar[]> {
    return this.#read(this.#db, deploymentId);
  }

  async change(deploymentId: string, change: EnvChange, check: (result: readonly EnvVar[]) => void, audit?: AuditRecord): Promise<EnvVar[]> {
    return this.#db.transaction().execute(async (trx) => {
      // A no-op write on the deployment's row: on PostgreSQL it locks the row, so two changes of
      // one deployment's variables are checked against the limits one after the other.
      await lockDeployment(trx, deploymentId);
      const existing = new Map((await this.#read(trx, deploymentId)).map((v) => [v.key, v]));
      const now = nowIso();
      for (const key of change.unset) existing.delete(key);
      for (const [key, value] of change.set) existing.set(key, { key, value, secret: change.secret, updated_at: now });
      const result = [...existing.values()].sort(byKey);
      check(result);
      if (change.unset.length > 0) {
        await trx.deleteFrom('env_vars').where('deployment_id', '=', deploymentId).where('key', 'in', [...change.unset]).execute();
      }
      for (const [key, value] of change.set) {
        const row = { value: this.#cipher.encrypt(value, varContext(deploymentId, key)), secret: change.secret ? 1 : 0, updated_at: now };
        await trx
          .insertInto('env_vars')
          .values({ deployment_id: deploymentId, key, ...row })
          .onConflict((oc) => oc.columns(['deployment_id', 'key']).doUpdateSet(row))
          .execute();
      }
      await appendRecord(trx, audit);
      return result;
    });
  }

  async recordForBuild(deploymentId: string, buildId: string): Promise<EnvVar[]> {
    const vars = await this.current(deploymentId);
    await this.setBuildConfig(buildId, vars);
    return vars;
  }

  async setBuildConfig(buildId: string, vars: readonly EnvVar[], audit?: AuditRecord): Promise<void> {
    const row = { config: this.#cipher.encrypt(JSON.stringify(vars), buildContext(buildId)), updated_at: nowIso() };
    await this.#db.transaction().execute(async (trx) => {
      await trx
        .insertInto('build_configs')
        .values({ build_id: buildId, ...row })
        .onConflict((oc) => oc.column('build_id').doUpdateSet(row))
        .execute();
      await appendRecord(trx, audit);
    });
  }

  async buildConfig(buildId: string): Promise<EnvVar[] | undefined> {
    const row = await this.#db.selectFrom('build_configs').select('config').where('build_id', '=', buildId).executeTakeFirst();
    if (row === undefined) return undefined;
    return parseConfig(this.#cipher.decrypt(row.config, buildContext(buildId)));
  }

  async replace(deploymentId: string, vars: readonly EnvVar[], audit?: AuditRecord): Promise<void> {
    await this.#db.transaction().execute(async (trx) => {
      await trx.deleteFrom('env_vars').where('deployment_id', '=', deploymentId).execute();
      for (const v of vars) {
        await trx
          .insertInto('env_vars')
          .values({
            deployment_id: deploymentId,
            key: v.key,
            value: this.#cipher.encrypt(v.value, varContext(deploymentId, v.key)),
            secret: v.secret ? 1 : 0,
            updated_at: v.updated_at,
          })
          .execute();
      }
      await appendRecord(trx, audit);
    });
  }

  async #read(db: Executor, deploymentId: string): Promise<EnvVar[]> {
    const rows = await db.selectFrom('env_vars').selectAll().where('deployment_id', '=', deploymentId).execute();
    // Sorted here, not in SQL: PostgreSQL would order by its locale's collation, SQLite by bytes.
    rows.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
    return rows.map((r) => ({
      key: r.key,
      value: this.#cipher.decrypt(r.value, varContext(deploymentId, r.key)),
      secret: r.secret === 1,
      updated_at: r.updated_at,
    }));
  }
}

function parseConfig(json: string): EnvVar[] {
  const parsed = JSON.parse(json) as EnvVar[];
  return parsed.map((v) => ({ key: String(v.key), value: String(v.value), secret: v.secret === true, updated_at: String(v.updated_at) }));
}

/** The stored key check value (null before the first start with encryption). */
export async function readKeyCheck(db: Db): Promise<string | null> {
  const row = await db.selectFrom('instance').select('key_check').executeTakeFirst();
  return row?.key_check ?? null;
}

/** Stores the key check value. The instance row exists (see instanceId). */
export async function writeKeyCheck(db: Db, check: string): Promise<void> {
  await db.updateTable('instance').set({ key_check: check }).execute();
}

/**
 * Re-encrypts every stored value (variables, builds' configurations, TLS private keys, webhook secrets, the key check) from `from`
 * to `to` in one transaction: either all values move to the new key or none does.
 * Returns how many values were re-encrypted.
 */
export async function reencryptAll(db: Db, from: ValueCipher, to: ValueCipher): Promise<number> {
  return db.transaction().execute(async (trx) => {
    let count = 0;
    for (const r of await trx.selectFrom('env_vars').select(['deployment_id', 'key', 'value']).execute()) {
      const context = varContext(r.deployment_id, r.key);
      const value = to.encrypt(from.decrypt(r.value, context), context);
      await trx.updateTable('env_vars').set({ value }).where('deployment_id', '=', r.deployment_id).where('key', '=', r.key).execute();
      count += 1;
    }
    for (const r of await trx.selectFrom('build_configs').select(['build_id', 'config']).execute()) {
      const context = buildContext(r.build_id);
      await trx.updateTable('build_configs').set({ config: to.encrypt(from.decrypt(r.config, context), context) }).where('build_id', '=', r.build_id).execute();
      count += 1;
    }
    count += await reencryptCertificates(trx, from, to);
    count += await reencryptWebhooks(trx, from, to);
    count += await reencryptDatabaseCredentials(trx, from, to);
    count += await reencryptDestinationSecrets(trx, from, to);
    await trx.updateTable('instance').set({ key_check: to.keyCheck() }).execute();
    return count;
  });
}
