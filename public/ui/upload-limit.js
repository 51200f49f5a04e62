// The server's upload limit, checked in the browser before an upload is sent (and before a new app is created).
import { call } from './api.js';

/** `n` bytes in MiB, one decimal at most (as the server and the CLI say it). */
export function mib(n) {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(Math.floor((n / 1024) * 10) / 10).toFixed(1).replace(/\.0$/, '')} KiB`;
  return `${(Math.floor((n / (1024 * 1024)) * 10) / 10).toFixed(1).replace(/\.0$/, '')} MiB`;
}

/** Throws, with what to do, when `size` packed bytes are more than the server accepts; an older server without GET /limits is left to refuse itself. */
export async function checkUploadSize(size) {
  const limits = await call('GET', '/limits').catch(() => null);
  if (!limits || size <= limits.max_upload_bytes) return;
  throw new Error(`The source is ${mib(size)} packed, more than this server's upload limit of ${mib(limits.max_upload_bytes)}: ` +
    `leave files out with .dockerignore (dependencies, build output, data), or ask the operator to raise ${limits.max_upload_setting}. Nothing was created or uploaded.`);
}
