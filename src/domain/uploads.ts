// Upload use-case: receive an archive (streamed to disk), check it strictly, then swap it in atomically.
import { deploymentRecord } from './audit.js';
import crypto from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import type { ArchiveLimits } from '../source/archive.js';
import { extractArchive, writeFileInside } from '../source/archive.js';
import type { SourceStore } from '../source/source-store.js';
import { getDeploymentRow } from './deployments.js';
import type { DeploymentCatalog } from './deployment-catalog.js';
import { DomainError } from '../core/errors.js';
import type { Principal } from '../core/principal.js';

/** One part of a multipart upload, as the transport hands it over. */
export type UploadPart =
  | { readonly kind: 'file'; readonly field: string; readonly stream: Readable }
  | { readonly kind: 'field'; readonly field: string; readonly value: string };

/**
 * Uploads kept where every instance can read them (several instances on one database, decisions
 * §15): the archive as received and the Dockerfile text sent with it. Implemented in src/db/.
 */
export interface SharedUploads {
  save(deploymentId: string, uploadId: string, archiveFile: string, dockerfile: string | undefined): Promise<void>;
  /** Writes the upload's archive to `file`; undefined when it is not kept. */
  load(uploadId: string, file: string, signal?: AbortSignal): Promise<{ dockerfile: string | null } | undefined>;
  /** Drops the deployment's uploads not in `keep`. */
  prune(deploymentId: string, keep: ReadonlySet<string | null>): Promise<void>;
}

export interface UploadDeps {
  readonly deployments: DeploymentCatalog;
  readonly store: SourceStore;
  /** Set when several instances may share the database: uploads are kept there too. */
  readonly shared?: SharedUploads | undefined;
  readonly maxUploadBytes: number;
  readonly archiveLimits: ArchiveLimits;
}

/** Largest accepted `dockerfile` part, sent as text or as a file (its content is the Dockerfile). */
export const MAX_DOCKERFILE_BYTES = 1024 * 1024;

/**
 * Checks the caller may upload to this deployment (before any byte is read): it must be theirs
 * and an archive deployment.
 */
export async function authorizeUpload(catalog: DeploymentCatalog, principal: Principal, id: string): Promise<void> {
  const row = await getDeploymentRow(catalog, principal, id, 'change');
  if (row.source_type !== 'archive') {
    throw new DomainError('validation_error', 'this is a git deployment; uploads are for archive deployments');
  }
}

/**
 * Receives the parts `archive` (required, tar.gz) and `dockerfile` (optional text, or a file holding
 * the text), validates the archive, and makes it the deployment's source. A rejected upload leaves the
 * previous one as it was. However the call ends (success, refusal, `parts` failing because the
 * connection closed, `signal` aborting), its staging directory is removed before it settles: the
 * one cleanup path for an upload's files.
 */
export async function uploadSource(
  deps: UploadDeps,
  principal: Principal,
  id: string,
  parts: AsyncIterable<UploadPart>,
  signal?: AbortSignal,
): Promise<{ status: 'uploaded'; size: number }> {
  await authorizeUpload(deps.deployments, principal, id);
  const staged = deps.store.stagingPath('upload');
  try {
    let received: { size: number; sha256: string } | undefined;
    let dockerfile: string | undefined;
    for await (const part of parts) {
      if (part.kind === 'file' && part.field === 'archive') {
        if (received !== undefined) throw new DomainError('validation_error', 'send exactly one "archive" part');
        received = await deps.store.receive(part.stream, path.join(staged, 'archive.tar.gz'), deps.maxUploadBytes);
      } else if (part.kind === 'field' && part.field === 'dockerfile') {
        dockerfile = part.value;
      } else if (part.kind === 'file' && part.field === 'dockerfile') {
        dockerfile = await readSmall(part.stream, MAX_DOCKERFILE_BYTES);
      } else if (part.kind === 'field' && part.field === 'archive') {
        throw new DomainError('validation_error', 'the "archive" part must be a file (a tar.gz), not a text field');
      } else {
        if (part.kind === 'file') part.stream.resume();
        throw new DomainError('validation_error', `unexpected part "${part.field}"; expected "archive" and optionally "dockerfile"`);
      }
    }
    if (received === undefined) throw new DomainError('validation_error', 'the "archive" part (a tar.gz file) is required');
    if (received.size === 0) throw new DomainError('validation_error', 'the archive is empty');

    await extractArchive(path.join(staged, 'archive.tar.gz'), path.join(staged, 'src'), deps.archiveLimits, signal);
    signal?.throwIfAborted();
    // The deployment may have changed (or gone) while the archive streamed in.
    const row = await getDeploymentRow(deps.deployments, principal, id, 'change');
    if (dockerfile !== undefined) await writeFileInside(path.join(staged, 'src'), row.dockerfile_path, dockerfile);

    const uploadId = crypto.randomUUID();
    await deps.store.commitUpload(staged, id, uploadId);
    // Before the deployment names it: any instance may build it from then on.
    await deps.shared?.save(id, uploadId, path.join(deps.store.uploadDir(id, uploadId), 'archive.tar.gz'), dockerfile);
    const previous = row.upload_id;
    const updated = await deps.deployments.setUpload(id, { id: uploadId, size: received.size, sha256: received.sha256 }, deploymentRecord(principal, row, 'deployment.upload'));
    if (!updated) {
      await deps.store.removeUpload(id, uploadId);
      throw new DomainError('not_found', 'deployment not found');
    }
    if (previous !== null) await pruneUploads(deps, id);
    return { status: 'uploaded', size: received.size };
  } finally {
    await deps.store.remove(staged);
  }
}

/** Removes uploads no longer referenced by the deployment or by a build in flight. */
export async function pruneUploads(deps: Pick<UploadDeps, 'deployments' | 'store' | 'shared'>, deploymentId: string): Promise<void> {
  const keep = await deps.deployments.uploadsInUse(deploymentId);
  for (const uploadId of await deps.store.listUploads(deploymentId)) {
    if (!keep.has(uploadId)) await deps.store.removeUpload(deploymentId, uploadId);
  }
  await deps.shared?.prune(deploymentId, keep);
}

/**
 * Brings an upload another instance received onto this instance's disk (a build here needs it):
 * the archive read back from the database, extracted under the same limits, the Dockerfile text
 * written where the deployment reads it. False when the database does not keep it.
 */
export async function restoreUpload(
  deps: { readonly store: SourceStore; readonly shared: SharedUploads; readonly archiveLimits: ArchiveLimits },
  deploymentId: string,
  uploadId: string,
  dockerfilePath: string,
  signal?: AbortSignal,
): Promise<boolean> {
  const staged = deps.store.stagingPath('restore');
  try {
    await mkdir(staged, { recursive: true, mode: 0o700 });
    const loaded = await deps.shared.load(uploadId, path.join(staged, 'archive.tar.gz'), signal);
    if (loaded === undefined) return false;
    await extractArchive(path.join(staged, 'archive.tar.gz'), path.join(staged, 'src'), deps.archiveLimits, signal);
    if (loaded.dockerfile !== null) await writeFileInside(path.join(staged, 'src'), dockerfilePath, loaded.dockerfile);
    try {
      await deps.store.commitUpload(staged, deploymentId, uploadId);
    } catch (err) {
      // Restored meanwhile by another build here: that copy serves.
      if (!existsSync(deps.store.sourceDir(deploymentId, uploadId))) throw err;
    }
    return true;
  } finally {
    await deps.store.remove(staged);
  }
}

async function readSmall(stream: Readable, max: number): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of stream) {
    size += (chunk as Buffer).length;
    if (size > max) throw new DomainError('validation_error', `the dockerfile part is larger than ${max} bytes`);
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}
