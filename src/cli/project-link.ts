// `slipway.json` in a deployed folder: which deployment (on which server) the folder deploys to.
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

/** Reads DIR/slipway.json; undefined when there is none. */
export async function readProjectLink(dir: string): Promise<ProjectLink | undefined> {
  const file = path.join(dir, LINK_FILE);
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new CliError(`cannot read ${file}: ${(err as Error).message}`);
  }
  try {
    const parsed = JSON.parse(text) as Partial<ProjectLink>;
    if (typeof parsed.deployment_id !== 'string' || typeof parsed.server !== 'string') throw new Error('missing fields');
    return { deployment_id: parsed.deployment_id, server: parsed.server };
  } catch {
    throw new CliError(`${file} is not a Slipway link file: fix or delete it`);
  }
}

/** Writes DIR/slipway.json atomically (temporary file, then rename). */
export async function writeProjectLink(dir: string, link: ProjectLink): Promise<void> {
  const file = path.join(dir, LINK_FILE);
  const tmp = `${file}.${randomBytes(6).toString('hex')}.tmp`;
  try {
    await writeFile(tmp, `${JSON.stringify(link, null, 2)}\n`, { flag: 'wx' });
    await rename(tmp, file);
  } catch (err) {
    await rm(tmp, { force: true });
    throw new CliError(`cannot write ${file}: ${(err as Error).message}`);
  }
}
