// A swarm release's crashes read from its services' task history (Engine API 1.41: GET /tasks, each task's Status).
import type { ReleaseExit } from '../../domain/app-health.js';
import { LABEL_RELEASE, type SwarmTask } from './swarm-service.js';

/** What is read of a task here (SwarmTask, and the exit code swarm reports for a task whose container ended). */
export type ExitedTask = SwarmTask & { Status?: SwarmTask['Status'] & { ContainerStatus?: { ContainerID?: string; ExitCode?: number } } };

/**
 * A task whose container ended by itself: `failed` (a non-zero exit, or killed by swarm as unhealthy
 * or out of memory) or `complete` (exit 0: with restart condition `any` swarm starts another task).
 * Tasks swarm stopped (an update, a scale-down, a drain: `shutdown`) and tasks that never ran
 * (`rejected`: no image, no node) are not the app's crashes.
 */
export function exitCodeOf(task: ExitedTask): number | null {
  const state = task.Status?.State;
  if (state !== 'failed' && state !== 'complete') return null;
  const code = task.Status?.ContainerStatus?.ExitCode;
  if (typeof code === 'number' && Number.isInteger(code)) return code;
  // ExitCode is left out when zero; a failed task's error says "task: non-zero exit (3)".
  const said = /non-zero exit \((\d+)\)/.exec(task.Status?.Err ?? '')?.[1];
  if (said !== undefined) return Number(said);
  return state === 'complete' ? 0 : null;
}

/**
 * The exits of the releases named (`<service id>/<release>`) among `tasks`, between two times (ms
 * since the epoch), each release's oldest first. A task belongs to the release its container's
 * release label names: the web service's tasks and those of a compose set's other services alike.
 * The exit's key is the task's id (one task ends once; swarm starts a new task for each restart).
 */
export function releaseExitsOf(tasks: readonly ExitedTask[], ids: readonly string[], sinceMs: number, untilMs: number): Map<string, ReleaseExit[]> {
  const byRelease = new Map(ids.flatMap((id) => {
    const slash = id.indexOf('/');
    return slash === -1 ? [] : [[id.slice(slash + 1), id] as const];
  }));
  const out = new Map<string, ReleaseExit[]>();
  for (const task of tasks) {
    const id = byRelease.get(task.Spec?.ContainerSpec?.Labels?.[LABEL_RELEASE] ?? '');
    if (id === undefined) continue;
    const exitCode = exitCodeOf(task);
    const at = Date.parse(task.Status?.Timestamp ?? '');
    if (exitCode === null || !Number.isFinite(at) || at < sinceMs || at > untilMs) continue;
    const list = out.get(id) ?? [];
    list.push({ key: task.ID, exitCode, at });
    out.set(id, list);
  }
  for (const list of out.values()) list.sort((a, b) => a.at - b.at);
  return out;
}

/**
 * Why crashes cannot be seen on this swarm, or null: swarm deletes ended tasks beyond
 * TaskHistoryRetentionLimit per slot (default 5), and with 0 at once, before any look finds them.
 */
export function historyWarning(info: { Spec?: { Orchestration?: { TaskHistoryRetentionLimit?: number } | null } }): string | null {
  const limit = info.Spec?.Orchestration?.TaskHistoryRetentionLimit;
  if (limit !== 0) return null;
  return "the swarm keeps no task history (TaskHistoryRetentionLimit 0): apps' crashes cannot be seen and they are always shown ok; keep some with `docker swarm update --task-history-limit 5`";
}
