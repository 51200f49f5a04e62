// Links between databases and deployments: the use-cases, the detaching of apps from a database's network, and what a release gets from its links.
import { DomainError } from '../core/errors.js';
import type { Principal } from '../core/principal.js';
import type { EnvVar } from '../domain/app-config.js';
import { checkEnvKey } from '../domain/app-config.js';
import { deploymentRecord } from '../domain/audit.js';
import { getDeploymentRow } from '../domain/deployments.js';
import type { DatabasesContext } from './database-context.js';
import type { DatabaseRow } from './database-store.js';
import { ENGINES } from './engines.js';
import { getDatabaseRow } from './database-access.js';

/** The variable a link sets when none is named. */
export const DEFAULT_LINK_ENV = 'DATABASE_URL';

export interface LinkView {
  database_id: string;
  deployment_id: string;
  env: string;
  database_name: string;
  engine: DatabaseRow['engine'];
  status: DatabaseRow['status'];
  created_at: string;
}

const notFound = (): DomainError => new DomainError('not_found', 'database not found');

/**
 * Links a database to a deployment of the same owner (the same team, or the same user outside
 * teams): from the deployment's next release its containers join the database's network and get
 * `env` as a secret variable holding the URL. Anything else is a database not found (404).
 */
export async function linkDatabase(ctx: DatabasesContext, principal: Principal, deploymentId: string, input: { database_id: string; env?: string | undefined }): Promise<LinkView> {
  const deployment = await getDeploymentRow(ctx.deployments, principal, deploymentId, 'change');
  const env = input.env ?? DEFAULT_LINK_ENV;
  checkEnvKey(env);
  const database = await getDatabaseRow(ctx, principal, input.database_id, 'change');
  const sameOwner = database.team_id === deployment.team_id && (database.team_id !== null || database.user_id === deployment.user_id);
  if (!sameOwner) throw notFound();
  const created_at = new Date().toISOString();
  const outcome = await ctx.store.link(
    { database_id: database.id, deployment_id: deployment.id, env, created_at },
    deploymentRecord(principal, deployment, 'deployment.database.link', 'database', database.id),
  );
  if (outcome === 'env_taken') throw new DomainError('validation_error', `variable "${env}" already holds the URL of another database linked to this deployment`);
  if (outcome === 'already_linked') throw new DomainError('invalid_state', `database "${database.name}" is already linked to this deployment`);
  // The running release does not have the variable yet: pending until the next one, as a variable set by hand.
  await ctx.deployments.markConfigPending(deployment.id, [env]);
  return present(database, { database_id: database.id, deployment_id: deployment.id, env, created_at });
}

/** The databases linked to a deployment (viewer and up), oldest link first. */
export async function listLinks(ctx: DatabasesContext, principal: Principal, deploymentId: string): Promise<LinkView[]> {
  const deployment = await getDeploymentRow(ctx.deployments, principal, deploymentId, 'read');
  const views: LinkView[] = [];
  for (const link of await ctx.store.linksOfDeployment(deployment.id)) {
    const database = await ctx.store.get(link.database_id);
    if (database !== undefined) views.push(present(database, link));
  }
  return views;
}

/** Unlinks a database: its variable goes at the next release, and the deployment's containers leave its network now. */
export async function unlinkDatabase(ctx: DatabasesContext, principal: Principal, deploymentId: string, databaseId: string): Promise<void> {
  const deployment = await getDeploymentRow(ctx.deployments, principal, deploymentId, 'change');
  const link = (await ctx.store.linksOfDeployment(deployment.id)).find((l) => l.database_id === databaseId);
  const removed = await ctx.store.unlink(databaseId, deployment.id, deploymentRecord(principal, deployment, 'deployment.database.unlink', 'database', databaseId));
  if (!removed) throw new DomainError('not_found', 'link not found');
  await detachLinkedApps(ctx, databaseId, [deployment.id]);
  if (link !== undefined) await ctx.deployments.markConfigPending(deployment.id, [link.env]);
}

/** The links' variables leave their apps at their next release: pending on each app until then. */
export async function markLinksPending(ctx: Pick<DatabasesContext, 'deployments'>, links: ReadonlyArray<{ deployment_id: string; env: string }>): Promise<void> {
  for (const link of links) await ctx.deployments.markConfigPending(link.deployment_id, [link.env]);
}

/** Takes the containers of `deploymentIds` off the database's network (access ends now, not at their next release). */
export async function detachLinkedApps(ctx: Pick<DatabasesContext, 'services' | 'instanceId'>, databaseId: string, deploymentIds: readonly string[]): Promise<void> {
  await ctx.services.detach(ctx.instanceId, databaseId, deploymentIds);
}

/**
 * What a release of `deploymentId` gets from its links: each linked database's URL as a secret
 * variable, and each database's network to join (made if missing, so a release never waits on it).
 */
export async function linkedReleaseParts(ctx: DatabasesContext, deploymentId: string): Promise<{ vars: EnvVar[]; networks: string[] }> {
  const vars: EnvVar[] = [];
  const networks: string[] = [];
  for (const { link, database, credentials } of await linkedCredentials(ctx, deploymentId)) {
    vars.push({ key: link.env, value: ENGINES[database.engine].url(credentials, database.name), secret: true, updated_at: link.created_at });
    networks.push(await ctx.services.network(ctx.instanceId, database.id, ctx.subnetPool));
  }
  return { vars, networks };
}

/**
 * What an app of `deploymentId` must never show of its databases: each URL and each password (an
 * app may print either). Not only the links of now: a release started before an unlink still holds
 * the URL until the next one, so every database its owner (or team) has is masked.
 */
export async function linkedSecretValues(ctx: DatabasesContext, deploymentId: string): Promise<string[]> {
  const owner = await ctx.deployments.owner(deploymentId);
  if (owner === undefined) return [];
  const values: string[] = [];
  let before: number | undefined;
  for (;;) {
    const page = await ctx.store.list(owner.user_id, owner.team_id === null ? [] : [owner.team_id], before, OWNED_PAGE);
    for (const database of page) {
      const credentials = await ctx.store.credentials(database.id);
      if (credentials !== undefined) values.push(ENGINES[database.engine].url(credentials, database.name), credentials.password);
    }
    if (page.length < OWNED_PAGE) return values;
    before = page.at(-1)!.seq;
  }
}

/** Databases read per query when gathering an owner's secret values. */
const OWNED_PAGE = 200;

async function linkedCredentials(ctx: DatabasesContext, deploymentId: string) {
  const found = [];
  for (const link of await ctx.store.linksOfDeployment(deploymentId)) {
    const database = await ctx.store.get(link.database_id);
    const credentials = database === undefined ? undefined : await ctx.store.credentials(database.id);
    if (database !== undefined && credentials !== undefined) found.push({ link, database, credentials });
  }
  return found;
}

function present(database: DatabaseRow, link: { database_id: string; deployment_id: string; env: string; created_at: string }): LinkView {
  return {
    database_id: link.database_id,
    deployment_id: link.deployment_id,
    env: link.env,
    database_name: database.name,
    engine: database.engine,
    status: database.status,
    created_at: link.created_at,
  };
}
