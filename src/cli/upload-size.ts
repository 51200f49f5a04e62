// An upload's size, checked before anything is created or sent: the files against the extracted limit, the archive against the upload limit.
import { lstat } from 'node:fs/promises';
import path from 'node:path';
import type { ApiClient } from './api-client.js';
import { CliError } from './cli-error.js';
import type { SourceListing } from './pack.js';
import { UPLOAD_LIMIT_REMEDY, formatMiB } from '../core/upload-limit.js';

/** GET /api/v1/limits. */
export interface UploadLimits {
  max_upload_bytes: number;
  max_upload_setting: string;
  max_expanded_bytes: number;
  max_archive_entries: number;
}

/** The server's upload limits; undefined from a server too old to say (it still refuses an oversize upload itself). */
export async function fetchUploadLimits(client: ApiClient): Promise<UploadLimits | undefined> {
  try {
    return await client.request<UploadLimits>('GET', '/api/v1/limits');
  } catch (err) {
    if (err instanceof CliError && err.status === 404) return undefined;
    throw err;
  }
}

/** What a listing holds: its files' bytes in all, and its largest files (the first candidates for .dockerignore). */
export interface SourceSize {
  bytes: number;
  entries: number;
  largest: Array<{ path: string; bytes: number }>;
}

/** Adds up the regular files of `listing` (links and folders count nothing). */
export async function measureSource(listing: SourceListing): Promise<SourceSize> {
  const files: Array<{ path: string; bytes: number }> = [];
  for (const entry of listing.entries) {
    if (listing.links.has(entry)) continue;
    const info = await lstat(path.join(listing.root, entry)).catch(() => undefined);
    if (info?.isFile() === true) files.push({ path: entry, bytes: info.size });
  }
  files.sort((a, b) => b.bytes - a.bytes);
  return { bytes: files.reduce((sum, file) => sum + file.bytes, 0), entries: listing.entries.length, largest: files.slice(0, 3) };
}

function largestList(size: SourceSize): string {
  return size.largest.length === 0 ? '' : `; largest: ${size.largest.map((f) => `${f.path} (${formatMiB(f.bytes)})`).join(', ')}`;
}

const NOTHING_DONE = 'Nothing was created or uploaded.';

/** Refuses, before packing, a source the server would refuse once extracted. */
export function checkSourceSize(dir: string, size: SourceSize, limits: UploadLimits): void {
  if (size.bytes > limits.max_expanded_bytes) {
    throw new CliError(
      `${dir} holds ${formatMiB(size.bytes)} of files to upload, more than this server accepts once extracted (${formatMiB(limits.max_expanded_bytes)}${largestList(size)}): ` +
        `leave files out with .dockerignore, or ask the operator to raise SLIPWAY_MAX_EXPANDED_BYTES. ${NOTHING_DONE}`,
    );
  }
  if (size.entries > limits.max_archive_entries) {
    throw new CliError(
      `${dir} holds ${size.entries} files and folders to upload, more than this server accepts (${limits.max_archive_entries}): ` +
        `leave files out with .dockerignore, or ask the operator to raise SLIPWAY_MAX_ARCHIVE_ENTRIES. ${NOTHING_DONE}`,
    );
  }
}

/** The refusal of a source whose archive passed the upload limit while it was packed. */
export function packedTooLarge(dir: string, size: SourceSize, limits: UploadLimits): CliError {
  return new CliError(
    `${dir} packs to more than ${formatMiB(limits.max_upload_bytes)}, this server's upload limit (${formatMiB(size.bytes)} of files before compression${largestList(size)}): ` +
      `${UPLOAD_LIMIT_REMEDY}. ${NOTHING_DONE}`,
  );
}
