// `slipway.json` in a deployed folder: which deployment (on which server) the folder deploys to, and its volumes.
import { randomBytes } from 'node:crypto';
import { readFile, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { CliError } from './cli-error.js';
import { LINK_FILE } from './pack.js';

export interface ProjectLink {
  /** The deployment this folder deploys to. */
  deployment_id: string;
  /** The server it lives on (a link made for another server is ignored). */
  server: string;
}

/** A volume the folder's app needs (the deployment's `volumes` field). */
export interface ProjectVolume {
  name: string;
  mount_path: string;
}

/** Everything slipway.json may say; a file written by hand before the first deploy may hold only `volumes`. */
export interface ProjectFile {
  link: ProjectLink | undefined;
  /** undefined: the file does not list volumes (the app's are left as they are). */
  volumes: ProjectVolume[] | undefined;
}

/** Reads DIR/slipway.json; undefined when there is none. */
export async function readProjectFile(dir: string): Promise<ProjectFile | undefined> {
  const file = path.join(dir, LINK_FILE);
  const parsed = await readJson(file);
  if (parsed === undefined) return undefined;
  const bad = (): CliError => new CliError(`${file} is not a Slipway link file: fix or delete it`);
  const { deployment_id: id, server, volumes } = parsed;
  if ((id === undefined) !== (server === undefined)) throw bad();
  if (id !== undefined && (typeof id !== 'string' || typeof server !== 'string')) throw bad();
  if (volumes !== undefined && !isVolumeList(volumes)) {
    throw new CliError(`${file}: "volumes" must be a list of {"name": "...", "mount_path": "/..."}`);
  }
  return {
    link: id === undefined ? undefined : { deployment_id: id as string, server: server as string },
    volumes: volumes === undefined ? undefined : volumes.map((v) => ({ name: v.name, mount_path: v.mount_path })),
  };
}

/** Reads DIR/slipway.json's link; undefined when there is no file or it names no deployment yet. */
export async function readProjectLink(dir: string): Promise<ProjectLink | undefined> {
  return (await readProjectFile(dir))?.link;
}

/** Writes the link into DIR/slipway.json atomically (temporary file, then rename), keeping what else it says. */
export async function writeProjectLink(dir: string, link: ProjectLink): Promise<void> {
  const file = path.join(dir, LINK_FILE);
  const existing = (await readJson(file).catch(() => undefined)) ?? {};
  const tmp = `${file}.${randomBytes(6).toString('hex')}.tmp`;
  try {
    await writeFile(tmp, `${JSON.stringify({ ...existing, ...link }, null, 2)}\n`, { flag: 'wx' });
    await rename(tmp, file);
  } catch (err) {
    await rm(tmp, { force: true });
    throw new CliError(`cannot write ${file}: ${(err as Error).message}`);
  }
}

async function readJson(file: string): Promise<Record<string, unknown> | undefined> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new CliError(`cannot read ${file}: ${(err as Error).message}`);
  }
  try {
    const parsed: unknown = JSON.parse(text);
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new Error('not an object');
    return parsed as Record<string, unknown>;
  } catch {
    throw new CliError(`${file} is not a Slipway link file: fix or delete it`);
  }
}

function isVolumeList(value: unknown): value is ProjectVolume[] {
  return (
    Array.isArray(value) &&
    value.every((v) => typeof v === 'object' && v !== null && typeof (v as ProjectVolume).name === 'string' && typeof (v as ProjectVolume).mount_path === 'string')
  );
}

/** Whether the app's volumes already are the ones listed (names compare case-insensitively, as the server folds them). */
export function sameVolumes(listed: readonly ProjectVolume[], current: readonly ProjectVolume[] | undefined): boolean {
  const norm = (list: readonly ProjectVolume[]): string => JSON.stringify(list.map((v) => [v.name.trim().toLowerCase(), v.mount_path]));
  return norm(listed) === norm(current ?? []);
}
