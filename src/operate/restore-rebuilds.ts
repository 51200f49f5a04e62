// After a restore, the first start rebuilds and releases every deployment that was live, from its recorded commit or its stored upload.
import fsp from 'node:fs/promises';
import path from 'node:path';
import type { Part } from '../core/parts.js';
import type { Principal } from '../core/principal.js';
import type { DeployOptions } from '../domain/operations.js';

/** The file `slipway server restore` leaves in the data directory; removed once its rebuilds are queued. */
export const REBUILD_MARKER = 'restore-rebuild.json';

/** A deployment that was live in the backup. */
export interface RebuildEntry {
  readonly deployment_id: string;
  readonly user_id: string;
  readonly source_type: 'git' | 'archive';
  readonly branch: string | null;
  readonly commit_sha: string;
}

export interface RestoreRebuildDeps {
  readonly dataDir: string;
  readonly deploy: (principal: Principal, deploymentId: string, options: DeployOptions) => Promise<unknown>;
  readonly log: (level: 'info' | 'warn', msg: string, detail?: object) => void;
}

/**
 * Reads the marker at start and queues a deploy of each listed deployment, all at once (the build
 * queue bounds how many build at once): a git app builds exactly the commit that was live, an archive app its
 * stored upload. The images and containers of the lost host are not needed. The marker goes once
 * every deploy is queued, so a crash before that queues them again at the next start.
 */
export function restoreRebuildsPart(deps: RestoreRebuildDeps): Part<undefined> {
  return {
    offers: undefined,
    async start() {
      const file = path.join(deps.dataDir, REBUILD_MARKER);
      let entries: RebuildEntry[];
      try {
        entries = (JSON.parse(await fsp.readFile(file, 'utf8')) as { deployments: RebuildEntry[] }).deployments;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
        deps.log('warn', `${file} is not readable; no deployment is rebuilt after the restore`, { err });
        return;
      }
      // All queued at once, as many deploys through the API would be: the build queue's slots and its
      // fairness decide the order, and no deploy waits for the one before it to be recorded (one
      // deployment's lock, held by its recovery attempt, used to hold up every deployment after it).
      await Promise.all(
        entries.map((entry) => {
          // The owner's deploy, with an administrator's reach: a team's app is rebuilt whatever the owner's role now.
          const principal: Principal = { userId: entry.user_id, isAdmin: true, via: 'session', sessionId: undefined, apiKeyId: undefined };
          const options: DeployOptions =
            entry.source_type === 'git' && entry.branch !== null && /^[0-9a-f]{40}$/.test(entry.commit_sha)
              ? { wait: false, commit: { sha: entry.commit_sha, branch: entry.branch } }
              : { wait: false };
          return deps.deploy(principal, entry.deployment_id, options).catch((err: unknown) => deps.log('warn', `could not rebuild deployment ${entry.deployment_id} after the restore`, { err }));
        }),
      );
      deps.log('info', `restore: ${entries.length} deployment${entries.length === 1 ? '' : 's'} that were live are being rebuilt`);
      await fsp.rm(file, { force: true });
    },
  };
}
