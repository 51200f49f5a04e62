// The caller's managed database named by id or name (the CLI's db and backup commands).
import type { ApiClient } from './api-client.js';
import { CliError } from './cli-error.js';

export interface ManagedDatabase {
  id: string;
  name: string;
  engine: string;
  image: string;
  status: string;
  error: string | null;
  team_id: string | null;
  size_bytes: number;
  host: string;
  port: number;
  memory_mb: number | null;
  cpus: number | null;
  created_at: string;
  updated_at: string;
}

/** A database by id or name among the caller's (and their teams'). */
export async function findDatabase(client: ApiClient, ref: string): Promise<ManagedDatabase> {
  const all = await client.list<ManagedDatabase>('/api/v1/databases');
  const byId = all.find((d) => d.id === ref.toLowerCase());
  const byName = all.filter((d) => d.name === ref.toLowerCase());
  const found = byId ?? (byName.length === 1 ? byName[0] : undefined);
  if (found === undefined) {
    throw new CliError(byName.length > 1 ? `several of your databases are named "${ref}" (yours and a team's): use the id (see \`slipway db ls\`)` : `no database "${ref}" among yours (see \`slipway db ls\`)`);
  }
  return found;
}

