// What each event says: its outbox key, whose object it is about, and its message in each channel's format (Slack, Discord, signed webhook JSON, e-mail).
import crypto from 'node:crypto';
import type { AppEvent } from '../domain/app-events.js';

/** Longest message text sent (Discord's limit is 2,000 characters; a build failure can be long). */
export const MAX_MESSAGE_CHARS = 1_800;

const short = (id: string): string => id.slice(0, 8);

/** The ten-minute window an event without its own time falls in, so instances that see it together agree on its key. */
const window10m = (at: Date): string => new Date(Math.floor(at.getTime() / 600_000) * 600_000).toISOString();

/**
 * The outbox key of an event: the same on every instance that sees it, different for the next
 * occurrence (a build, a crash-loop episode, a backup, a run; a certificate or a node by ten-minute window).
 */
export function dedupeKey(event: AppEvent, at: Date): string {
  switch (event.type) {
    case 'deploy.succeeded':
    case 'deploy.failed':
      return `${event.type}:${event.buildId}`;
    case 'app.crashed':
      return `${event.type}:${event.releaseId}:${event.since}`;
    case 'backup.failed':
    case 'backup.verified':
      return `${event.type}:${event.backupId}`;
    case 'job.failed':
      return `${event.type}:${event.runId}`;
    case 'certificate.failed':
      return `${event.type}:${event.hostname}:${window10m(at)}`;
    case 'node.down':
      return `${event.type}:${event.nodeId}:${window10m(at)}`;
  }
}

/** Whose object the event is about: a deployment's or a database's owner; the platform's (administrators) for a node or the platform's own certificate. */
export function eventSubject(event: AppEvent): { deploymentId: string } | { databaseId: string } | 'admins' {
  switch (event.type) {
    case 'backup.failed':
    case 'backup.verified':
      return { databaseId: event.databaseId };
    case 'certificate.failed':
      return event.deploymentId === null ? 'admins' : { deploymentId: event.deploymentId };
    case 'node.down':
      return 'admins';
    default:
      return { deploymentId: event.deploymentId };
  }
}

/** One message, before it is put in a channel's format. */
export interface Message {
  /** The delivery's id (stays the same across retries; receivers may deduplicate on it). */
  readonly id: string;
  /** The event's type (`test` for a test message). */
  readonly event: AppEvent['type'] | 'test';
  /** When the event happened (ISO 8601). */
  readonly at: string;
  /** The app, database, host or node the event is about. */
  readonly subject: string;
  /** What happened, one or two sentences. */
  readonly text: string;
  /** The dashboard page of the object. */
  readonly url: string;
  readonly deployment?: { id: string; subdomain: string };
  readonly database?: { id: string; name: string };
  readonly build?: { id: string };
  readonly job?: { id: string; name: string; run_id: string; status: string; exit_code: number | null };
}

const cut = (text: string): string => (text.length <= MAX_MESSAGE_CHARS ? text : `${text.slice(0, MAX_MESSAGE_CHARS - 1)}…`);

/** The message of an event: what happened, in words, and the dashboard page to look at. */
export function describeEvent(event: AppEvent, id: string, at: string, dashboard: URL): Message {
  const page = (hash: string): string => new URL(`/#/${hash}`, dashboard).href;
  const base = { id, event: event.type, at };
  switch (event.type) {
    case 'deploy.succeeded':
      return { ...base, subject: event.subdomain, text: `deploy succeeded: build ${short(event.buildId)} is live`, url: page(`d/${event.deploymentId}`), deployment: { id: event.deploymentId, subdomain: event.subdomain }, build: { id: event.buildId } };
    case 'deploy.failed':
      return { ...base, subject: event.subdomain, text: cut(`deploy failed (build ${short(event.buildId)}): ${event.message}`), url: page(`d/${event.deploymentId}`), deployment: { id: event.deploymentId, subdomain: event.subdomain }, build: { id: event.buildId } };
    case 'app.crashed':
      // The app's last line is left out: a channel may be read by more people than the app's owners.
      return {
        ...base,
        subject: event.subdomain,
        text: `crash loop: the app keeps exiting (${event.restarts} restarts since ${event.since}${event.exitCode === null ? '' : `, exit code ${event.exitCode}`})`,
        url: page(`d/${event.deploymentId}`),
        deployment: { id: event.deploymentId, subdomain: event.subdomain },
      };
    case 'backup.failed':
      return { ...base, subject: event.databaseName, text: cut(`backup ${short(event.backupId)} failed at ${event.step}: ${event.message}`), url: page('databases'), database: { id: event.databaseId, name: event.databaseName } };
    case 'backup.verified':
      return { ...base, subject: event.databaseName, text: `backup ${short(event.backupId)} verified: restored into a throwaway container and checked`, url: page('databases'), database: { id: event.databaseId, name: event.databaseName } };
    case 'job.failed':
      return {
        ...base,
        subject: event.subdomain,
        text: `job ${event.jobName} ${event.status === 'timed_out' ? 'timed out' : `failed${event.exitCode === null ? '' : ` (exit code ${event.exitCode})`}`}`,
        url: page(`d/${event.deploymentId}`),
        deployment: { id: event.deploymentId, subdomain: event.subdomain },
        job: { id: event.jobId, name: event.jobName, run_id: event.runId, status: event.status, exit_code: event.exitCode },
      };
    case 'certificate.failed':
      return {
        ...base,
        subject: event.hostname,
        text: cut(`the certificate for ${event.hostname} could not be obtained: ${event.message}`),
        url: page(event.deploymentId === null ? '' : `d/${event.deploymentId}`),
        ...(event.deploymentId === null ? {} : { deployment: { id: event.deploymentId, subdomain: event.hostname.split('.')[0] ?? event.hostname } }),
      };
    case 'node.down':
      return { ...base, subject: event.hostname, text: `swarm node ${event.hostname} (${event.nodeId}) is down`, url: page('') };
  }
}

/** A test message (`POST …/{id}/test`), for the channel's owner to see it arrive. */
export function testMessage(id: string, at: string, dashboard: URL): Message {
  return { id, event: 'test', at, subject: 'Slipway', text: 'test message: this channel receives Slipway notifications', url: new URL('/#/notifications', dashboard).href };
}

/** Slack's incoming-webhook body: text with the app, what happened and a link (mrkdwn). */
export function slackBody(m: Message): object {
  return { text: `*${m.subject}*: ${m.text} <${m.url}|Open in Slipway>` };
}

/** Discord's incoming-webhook body. */
export function discordBody(m: Message): object {
  return { username: 'Slipway', content: `**${m.subject}**: ${m.text}\n${m.url}` };
}

/** The signed webhook's JSON (decisions §23). */
export function webhookBody(m: Message): object {
  return {
    id: m.id,
    event: m.event,
    at: m.at,
    ...(m.deployment === undefined ? {} : { deployment: m.deployment }),
    ...(m.database === undefined ? {} : { database: m.database }),
    ...(m.build === undefined ? {} : { build: m.build }),
    ...(m.job === undefined ? {} : { job: m.job }),
    message: `${m.subject}: ${m.text}`,
    url: m.url,
  };
}

/** `sha256=<hex HMAC-SHA256 of the body>` under the channel's secret, as GitHub signs its deliveries. */
export function signature(secret: string, body: Buffer): string {
  return `sha256=${crypto.createHmac('sha256', secret).update(body).digest('hex')}`;
}

/** The e-mail: a one-line subject and a plain-text body. */
export function emailContent(m: Message): { subject: string; text: string } {
  return { subject: `[Slipway] ${m.subject}: ${m.text.split('\n')[0]?.slice(0, 150) ?? ''}`, text: `${m.subject}: ${m.text}\n\n${m.url}\n\nEvent: ${m.event} at ${m.at}\n` };
}
