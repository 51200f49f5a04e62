// Test helper: a compose deployment's source archive (the compose file and a busybox web service's context) on the local busybox image.
import fsp from 'node:fs/promises';
import path from 'node:path';
import { tarGzOf, tempDir, testEngine } from './apps.js';
import { ensureBusyboxImage, writeBusyboxApp } from './busybox-image.js';

/** A tar.gz holding `compose.yaml` (`compose`) and `web/`, a busybox httpd serving `body` on 8080. */
export async function composeArchive(compose: string, body: string): Promise<Buffer> {
  await ensureBusyboxImage(testEngine());
  const dir = tempDir('compose');
  try {
    await writeBusyboxApp(path.join(dir, 'web'), { body });
    await fsp.writeFile(path.join(dir, 'compose.yaml'), compose);
    return await tarGzOf(dir);
  } finally {
    await fsp.rm(dir, { recursive: true, force: true });
  }
}
