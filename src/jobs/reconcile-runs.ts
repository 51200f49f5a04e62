// Runs left `running` by an instance that died: ended (recorded failed) and their containers removed.
import type { AppRuntime } from '../runtime/app-runtime.js';
import type { JobStore } from './job-store.js';

/**
 * Ends every `running` run whose instance is not live (with `atStart`, this instance's own too:
 * it has none in flight yet) and removes its container. Resolves with how many were ended.
 */
export async function endOrphanedRuns(deps: {
  readonly store: Pick<JobStore, 'runningRuns' | 'finishRun'>;
  readonly runtime: Pick<AppRuntime, 'removeRelease'>;
  readonly self: string;
  readonly live: ReadonlySet<string>;
  readonly atStart: boolean;
}): Promise<number> {
  let ended = 0;
  for (const run of await deps.store.runningRuns()) {
    const mine = run.instance === deps.self;
    if (mine ? !deps.atStart : run.instance !== null && deps.live.has(run.instance)) continue;
    if (run.container_id !== null) await deps.runtime.removeRelease(run.container_id).catch(() => undefined);
    await deps.store.finishRun(run.id, { status: 'failed', exit_code: null, message: 'the instance running it stopped before it ended', finished_at: new Date().toISOString() });
    ended++;
  }
  return ended;
}
