// This control-plane instance's id: kept in its data directory, so it survives restarts and two
// instances sharing one database (each with its own data directory) never take each other's work.
import crypto from 'node:crypto';
import fsp from 'node:fs/promises';
import path from 'node:path';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** Reads `<dataDir>/runner-id`, creating it on first start. */
export async function runnerId(dataDir: string): Promise<string> {
  const file = path.join(dataDir, 'runner-id');
  const existing = await fsp.readFile(file, 'utf8').catch(() => '');
  if (UUID.test(existing.trim())) return existing.trim();
  const id = crypto.randomUUID();
  await fsp.mkdir(dataDir, { recursive: true, mode: 0o700 });
  await fsp.writeFile(file, `${id}\n`, { mode: 0o600 });
  return id;
}
