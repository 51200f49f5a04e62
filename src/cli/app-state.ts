// How the CLI words what an app's status leaves out: a crash loop, and configuration not applied yet.
import { healthSummary } from '../domain/app-health.js';
import type { Deployment } from './api-types.js';

/** Longest last line shown in a table cell (the whole line is in `slipway status`). */
const CELL_LINE = 40;

/**
 * The status column of `slipway apps`: the status, or what the app's health says when it keeps
 * crashing; `(restart pending)` after it when its configuration changed since its release, as the
 * dashboard's list shows a *restart pending* pill.
 */
export function statusCell(app: Pick<Deployment, 'status' | 'health' | 'config_pending'>): string {
  const pending = app.config_pending === true ? ' (restart pending)' : '';
  const health = app.health;
  if (health === undefined || health.state === 'ok') return `${app.status}${pending}`;
  const line = health.last_line !== null && health.last_line.length > CELL_LINE ? `${health.last_line.slice(0, CELL_LINE - 1)}…` : health.last_line;
  return `${healthSummary({ ...health, last_line: line })}${pending}`;
}

/** What is pending, and how to apply it: `LOG_LEVEL, volumes changed; applies at the next restart (`slipway restart hello`) or deploy`. */
export function pendingNote(app: Pick<Deployment, 'config_pending_keys' | 'subdomain' | 'status'>): string {
  const keys = app.config_pending_keys ?? [];
  const what = keys.length === 0 ? 'the configuration changed' : `${keys.join(', ')} changed`;
  return app.status === 'running' ? `${what}; the app runs the old values until \`slipway restart ${app.subdomain}\`` : `${what}; applies at the next deploy, restart or rollback`;
}
