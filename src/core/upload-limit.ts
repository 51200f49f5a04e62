// The upload limit as people read it: in MiB, with the setting that raises it and how to send less.

/** The server setting that bounds one upload (docs/configuration.md). */
export const UPLOAD_LIMIT_SETTING = 'SLIPWAY_MAX_UPLOAD_BYTES';

/** `bytes` in MiB, one decimal at most (`512 MiB`, `1.5 MiB`), in KiB below one MiB, in bytes below one KiB (never `0 KiB`). */
export function formatMiB(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${trim(bytes / 1024)} KiB`;
  return `${trim(bytes / (1024 * 1024))} MiB`;
}

function trim(value: number): string {
  return (Math.floor(value * 10) / 10).toFixed(1).replace(/\.0$/, '');
}

/** What to do about a source over the limit (the same words in the server's refusal, the CLI and the dashboard). */
export const UPLOAD_LIMIT_REMEDY = `leave files out with .dockerignore (dependencies, build output, data), or ask the operator to raise ${UPLOAD_LIMIT_SETTING}`;

/** The refusal of an archive over `maxBytes`. */
export function uploadTooLargeMessage(maxBytes: number): string {
  return `the archive is larger than this server's upload limit of ${formatMiB(maxBytes)}: ${UPLOAD_LIMIT_REMEDY}`;
}
