// APP arguments: a deployment named by its id, name or subdomain.
import type { ApiClient } from './api-client.js';
import type { Build, Deployment } from './api-types.js';
import { CliError, usageError } from './cli-error.js';
import type { CliIo } from './cli-io.js';
import { LINK_FILE } from './pack.js';
import { readProjectLink } from './project-link.js';

/**
 * Finds the caller's deployment whose id, subdomain or name is `ref` (ids and subdomains are
 * unique; names need not be). No match, or several, is an error naming the candidates.
 */
export async function resolveApp(client: ApiClient, ref: string): Promise<Deployment> {
  const all = await client.list<Deployment>('/api/v1/deployments');
  const byId = all.find((d) => d.id === ref.toLowerCase());
  if (byId !== undefined) return byId;
  const matches = all.filter((d) => d.subdomain === ref.toLowerCase() || d.name === ref);
  const [first, second] = matches;
  if (first === undefined) throw new CliError(`no app named "${ref}" (see \`slipway apps\`)`);
  if (second !== undefined) {
    const list = matches.map((d) => `${d.id} (${d.name}, ${d.subdomain})`).join('; ');
    throw new CliError(`"${ref}" is ambiguous: ${list}; use the id or subdomain`);
  }
  return first;
}

/** Finds a build of `app` by its full id or a unique prefix (like git's short hashes). */
export async function resolveBuild(client: ApiClient, app: Deployment, ref: string): Promise<Build> {
  const builds = await client.list<Build>(`/api/v1/deployments/${app.id}/builds`);
  const needle = ref.toLowerCase();
  const exact = builds.find((b) => b.id === needle);
  if (exact !== undefined) return exact;
  const matches = needle.length >= 4 ? builds.filter((b) => b.id.startsWith(needle)) : [];
  const [first, second] = matches;
  if (first === undefined) throw new CliError(`${app.name} has no build "${ref}" (see \`slipway builds ${app.subdomain}\`)`);
  if (second !== undefined) throw new CliError(`build "${ref}" is ambiguous: give more of the id`);
  return first;
}

/** The app named by `ref`, else the one ./slipway.json links to on this server. */
export async function appFor(client: ApiClient, io: CliIo, ref: string | undefined): Promise<Deployment> {
  if (ref !== undefined) return resolveApp(client, ref);
  const link = await readProjectLink(io.cwd);
  if (link === undefined || link.server !== client.url) {
    throw usageError(`name the app (--app APP), or run this in a folder deployed with \`slipway deploy\` (it has ${LINK_FILE})`);
  }
  return client.request<Deployment>('GET', `/api/v1/deployments/${link.deployment_id}`);
}
