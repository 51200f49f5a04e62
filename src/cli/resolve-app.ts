// APP arguments: a deployment named by its id, name or subdomain.
import type { ApiClient } from './api-client.js';
import type { Build, Deployment } from './api-types.js';
import { CliError } from './cli-error.js';

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
