// Sending one message to one channel: an HTTP POST (Slack, Discord, signed webhook) through the address guard, or an e-mail through SLIPWAY_SMTP_URL.
import nodemailer from 'nodemailer';
import { discordBody, emailContent, signature, slackBody, webhookBody, type Message } from './event-messages.js';
import type { Channel } from './notification-store.js';
import { ForbiddenTargetError, postChecked, type TargetPolicy } from './outgoing-request.js';

/** Every attempt's time limit (connection, redirects and answer; or the SMTP conversation). */
export const ATTEMPT_TIMEOUT_MS = 5_000;
/** Bytes of a receiver's answer kept (the start of an error page is enough to say what went wrong). */
export const MAX_ANSWER_BYTES = 16 * 1024;
/** Redirects followed, each to a checked address. */
export const MAX_REDIRECTS = 3;

/** The result of one attempt. */
export interface SendResult {
  readonly ok: boolean;
  readonly statusCode: number | null;
  readonly error: string | null;
  /** A network error or a 5xx (an SMTP 4xx): worth another attempt. */
  readonly retryable: boolean;
}

export interface SendSettings {
  readonly policy: TargetPolicy;
  /** SLIPWAY_SMTP_URL and SLIPWAY_SMTP_FROM (no URL: e-mail channels fail saying so). */
  readonly smtp: { readonly url: string | undefined; readonly from: string };
  readonly timeoutMs?: number;
}

const oneLine = (text: string, max = 300): string => {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length <= max ? flat : `${flat.slice(0, max - 1)}…`;
};

/** Sends `message` to `channel` once; never throws. */
export async function sendMessage(channel: Channel, message: Message, settings: SendSettings, signal?: AbortSignal): Promise<SendResult> {
  if (channel.type === 'email') return sendEmail(channel, message, settings, signal);
  if (channel.url === null) return { ok: false, statusCode: null, error: 'the channel has no URL', retryable: false };
  const payload = channel.type === 'slack' ? slackBody(message) : channel.type === 'discord' ? discordBody(message) : webhookBody(message);
  const body = Buffer.from(JSON.stringify(payload));
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (channel.type === 'webhook') {
    headers['x-slipway-event'] = message.event;
    headers['x-slipway-delivery'] = message.id;
    if (channel.secret !== null) headers['x-slipway-signature-256'] = signature(channel.secret, body);
  }
  try {
    const answer = await postChecked(channel.url, { headers, body, policy: settings.policy, timeoutMs: settings.timeoutMs ?? ATTEMPT_TIMEOUT_MS, maxResponseBytes: MAX_ANSWER_BYTES, maxRedirects: MAX_REDIRECTS, signal });
    if (answer.status >= 200 && answer.status < 300) return { ok: true, statusCode: answer.status, error: null, retryable: false };
    const said = oneLine(answer.body, 200);
    return { ok: false, statusCode: answer.status, error: `the receiver answered ${answer.status}${said === '' ? '' : `: ${said}`}`, retryable: answer.status >= 500 };
  } catch (err) {
    if (err instanceof ForbiddenTargetError) return { ok: false, statusCode: null, error: err.message, retryable: false };
    return { ok: false, statusCode: null, error: networkError(err, settings.timeoutMs ?? ATTEMPT_TIMEOUT_MS), retryable: true };
  }
}

function networkError(err: unknown, timeoutMs: number): string {
  if (err instanceof Error && (err.name === 'TimeoutError' || err.name === 'AbortError')) return `no answer within ${timeoutMs / 1000} s`;
  const code = (err as { code?: unknown }).code;
  const message = err instanceof Error ? err.message : String(err);
  return oneLine(typeof code === 'string' && !message.includes(code) ? `${code}: ${message}` : message);
}

async function sendEmail(channel: Channel, message: Message, settings: SendSettings, signal?: AbortSignal): Promise<SendResult> {
  if (settings.smtp.url === undefined) return { ok: false, statusCode: null, error: 'e-mail is not set up on this server (SLIPWAY_SMTP_URL)', retryable: false };
  if (channel.email === null) return { ok: false, statusCode: null, error: 'the channel has no e-mail address', retryable: false };
  const timeout = settings.timeoutMs ?? ATTEMPT_TIMEOUT_MS;
  const transport = nodemailer.createTransport({ ...smtpServer(settings.smtp.url), connectionTimeout: timeout, greetingTimeout: timeout, socketTimeout: timeout });
  const stop = (): void => transport.close();
  signal?.addEventListener('abort', stop, { once: true });
  try {
    const { subject, text } = emailContent(message);
    await transport.sendMail({ from: settings.smtp.from, to: channel.email, subject, text, headers: { 'X-Slipway-Event': message.event, 'X-Slipway-Delivery': message.id } });
    return { ok: true, statusCode: null, error: null, retryable: false };
  } catch (err) {
    const code = (err as { responseCode?: unknown }).responseCode;
    const response = (err as { response?: unknown }).response;
    const said = typeof response === 'string' ? response : err instanceof Error ? err.message : String(err);
    // A 5xx from the mail server is a refusal (it will refuse again); a 4xx or no answer is worth another try.
    const statusCode = typeof code === 'number' ? code : null;
    const what = statusCode === null ? 'the mail server could not be reached or failed' : `the mail server refused (${statusCode})`;
    return { ok: false, statusCode, error: `${what}: ${oneLine(said)}`, retryable: statusCode === null || statusCode < 500 };
  } finally {
    signal?.removeEventListener('abort', stop);
    transport.close();
  }
}

/**
 * SLIPWAY_SMTP_URL as nodemailer's options: smtps:// is TLS from the start, its certificate
 * checked; smtp:// upgrades with STARTTLS when the server offers it, as mail servers do between
 * themselves: opportunistic, the certificate not checked (a local relay's is often self-signed,
 * and a client that would otherwise fall back to plain text gains nothing from refusing it).
 */
function smtpServer(raw: string): { host: string; port: number; secure: boolean; tls?: { rejectUnauthorized: boolean }; auth?: { user: string; pass: string } } {
  const url = new URL(raw);
  const secure = url.protocol === 'smtps:';
  const user = decodeURIComponent(url.username);
  return {
    host: url.hostname.replace(/^\[(.*)\]$/, '$1'),
    port: url.port === '' ? (secure ? 465 : 587) : Number(url.port),
    secure,
    ...(secure ? {} : { tls: { rejectUnauthorized: false } }),
    ...(user === '' ? {} : { auth: { user, pass: decodeURIComponent(url.password) } }),
  };
}
