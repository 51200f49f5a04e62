// Makes sure the examples' base image (busybox:1.36) is on the engine: pulled from the registry when
// it can be, otherwise built locally from Debian's static busybox (air-gapped machines).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';

const IMAGE = 'busybox';
const TAG = '1.36';

function socketPath() {
  const host = process.env.DOCKER_HOST;
  if (host === undefined || host === '') return '/var/run/docker.sock';
  return host.startsWith('unix://') ? host.slice('unix://'.length) : null;
}

/** One Engine API call over the local socket; resolves with status and body text. */
function engine(method, urlPath, { body, headers = {}, timeoutMs = 30_000 } = {}) {
  return new Promise((resolve, reject) => {
    const req = http.request({ socketPath: socketPath(), method, path: urlPath, headers, timeout: timeoutMs }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk) => (text += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
    });
    req.on('timeout', () => req.destroy(new Error('timed out')));
    req.on('error', reject);
    if (body === undefined) req.end();
    else body.pipe(req);
  });
}

/** Installs Debian's busybox-static (root with apt-get only); true when /bin/busybox is there afterwards. Never exits the process. */
export function installBusybox(log) {
  const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;
  const aptGet = ['/usr/bin/apt-get', '/bin/apt-get'].find((file) => fs.existsSync(file));
  if (!isRoot || aptGet === undefined) return false;
  log(`${IMAGE}:${TAG} cannot be pulled: installing busybox-static with apt-get to build it locally…`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  const args = ['install', '-y', '--no-install-recommends', '--', 'busybox-static'];
  if (spawnSync(aptGet, args, { stdio: 'inherit', env }).status !== 0) {
    spawnSync(aptGet, ['update'], { stdio: 'inherit', env });
    spawnSync(aptGet, args, { stdio: 'inherit', env });
  }
  return fs.existsSync('/bin/busybox');
}

/** True when the engine already has busybox:1.36, or got it now (installing busybox-static when offline). */
export async function ensureExampleBase(log = (m) => process.stderr.write(`[setup] ${m}\n`)) {
  if (socketPath() === null) return false;
  const inspect = await engine('GET', `/images/${IMAGE}:${TAG}/json`).catch(() => ({ status: 0 }));
  if (inspect.status === 200) return true;
  const pulled = await engine('POST', `/images/create?fromImage=${IMAGE}&tag=${TAG}`, { timeoutMs: 60_000 }).catch(() => ({ status: 0, text: '' }));
  if (pulled.status === 200 && !/"error"/.test(pulled.text)) {
    log(`pulled ${IMAGE}:${TAG} for the examples`);
    return true;
  }
  // Offline: Debian's busybox-static, installed here as `npm test` does, gives the examples their base.
  if (!fs.existsSync('/bin/busybox') && !installBusybox(log)) {
    log(`${IMAGE}:${TAG} cannot be pulled and /bin/busybox is missing: examples/hello will not build (apt-get install busybox-static)`);
    return false;
  }
  const tar = await import('tar');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'slipway-busybox-'));
  try {
    fs.copyFileSync('/bin/busybox', path.join(dir, 'busybox'));
    fs.writeFileSync(
      path.join(dir, 'Dockerfile'),
      'FROM scratch\nCOPY busybox /bin/busybox\nRUN ["/bin/busybox", "--install", "-s", "/bin"]\nLABEL dev.slipway.local-substitute="built from the host busybox-static; no registry was reachable"\n',
    );
    const context = tar.c({ cwd: dir, portable: true }, ['Dockerfile', 'busybox']);
    const built = await engine('POST', `/build?t=${IMAGE}:${TAG}&rm=1&forcerm=1`, {
      body: context,
      headers: { 'content-type': 'application/x-tar' },
      timeoutMs: 120_000,
    });
    if (built.status !== 200 || /"error"/.test(built.text)) {
      log(`could not build a local ${IMAGE}:${TAG}: ${built.text.slice(-300)}`);
      return false;
    }
    log(`no registry reachable: built a local ${IMAGE}:${TAG} from the host's busybox-static for the examples`);
    return true;
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
