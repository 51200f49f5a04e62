// The swarm test cluster (decisions §16): three network namespaces on a test bridge, each with its own containerd and dockerd, joined into one swarm, plus a registry.
//   node scripts/swarm-cluster.mjs up | down ID | sweep | status
// `up` first tears down whatever a crashed earlier run left (a cluster whose owner process ended). Needs root and Debian's docker.io,
// containerd, iproute2 and docker-registry. It never touches the host's own dockerd; the only host
// iptables rule it adds is one FORWARD accept per cluster bridge, removed by `down`.
import { execFile, execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';

/** Every cluster lives under here, in a directory named by its id. */
export const STATE_ROOT = '/var/tmp/slipway-swarm';

/**
 * A cluster's names and addresses, all derived from its id (a number 1–250): bridge `slwswbr<id>`,
 * subnet 10.231.<id>.0/24, namespaces `slwsw<id>n<1-3>`. Two clusters (two test runs) never share one.
 */
export function clusterLayout(id) {
  const prefix = `10.231.${id}`;
  const dir = path.join(STATE_ROOT, String(id));
  const nodes = [1, 2, 3].map((n) => ({
    name: `slwsw${id}n${n}`,
    netns: `slwsw${id}n${n}`,
    hostEnd: `slwsw${id}h${n}`,
    address: `${prefix}.${10 + n}`,
    dir: path.join(dir, `node${n}`),
    socket: path.join(dir, `node${n}`, 'docker.sock'),
  }));
  return {
    id,
    dir,
    bridge: `slwswbr${id}`,
    hostAddress: `${prefix}.1`,
    nodes,
    // The registry listens in the manager's namespace; every node pulls from it over the bridge.
    registry: `${nodes[0].address}:5000`,
    // Where a test's Slipway runs its own registry (SLIPWAY_REGISTRY unset): every node trusts it too.
    ownRegistry: `${nodes[0].address}:5001`,
    forwardRule: ['FORWARD', '-i', `slwswbr${id}`, '-o', `slwswbr${id}`, '-j', 'ACCEPT'],
  };
}

function sh(cmd, args, options = {}) {
  return execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 60_000, ...options });
}
/** sh, without blocking: the nodes are set up side by side. */
async function shAsync(cmd, args, options = {}) {
  return (await promisify(execFile)(cmd, args, { encoding: 'utf8', timeout: 60_000, ...options })).stdout;
}
function quiet(cmd, args) {
  try {
    return sh(cmd, args);
  } catch {
    return undefined;
  }
}
export const docker = (node, args, options) => sh('docker', ['-H', `unix://${node.socket}`, ...args], options);

/** Starts a long-lived process in a node's network namespace, detached, its output to a file; writes its pid. */
function startIn(node, name, cmd, args) {
  const log = fs.openSync(path.join(node.dir, `${name}.log`), 'a');
  const child = spawn('nsenter', [`--net=/run/netns/${node.netns}`, '--', cmd, ...args], { detached: true, stdio: ['ignore', log, log] });
  child.unref();
  fs.writeFileSync(path.join(node.dir, `${name}.pid`), String(child.pid));
  fs.closeSync(log);
}

async function waitFor(what, check, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) throw new Error(`swarm cluster: ${what} not ready within ${timeoutMs / 1000} s`);
    await sleep(100);
  }
}

/** A call on a node's engine socket (no docker CLI process per look): the parsed JSON or text of a 2xx answer, or undefined on any failure. */
function engineCall(node, method, urlPath) {
  return new Promise((resolve) => {
    const req = http.request({ socketPath: node.socket, method, path: urlPath, timeout: 5000 }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk) => (body += chunk));
      res.on('end', () => {
        if ((res.statusCode ?? 0) < 200 || (res.statusCode ?? 0) > 299) return resolve(undefined);
        try {
          resolve(JSON.parse(body));
        } catch {
          resolve(body);
        }
      });
      res.on('error', () => resolve(undefined));
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(undefined));
    req.end();
  });
}
const engineGet = (node, urlPath) => engineCall(node, 'GET', urlPath);

/** Kills a process we started (by its pid file) and waits for it to end. */
async function stopPid(file, signal = 'SIGTERM') {
  let pid;
  try {
    pid = Number(fs.readFileSync(file, 'utf8'));
  } catch {
    return;
  }
  const alive = () => {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  };
  if (pid > 0 && alive()) {
    process.kill(pid, signal);
    const deadline = Date.now() + 20_000;
    while (alive() && Date.now() < deadline) await sleep(100);
    if (alive()) process.kill(pid, 'SIGKILL');
  }
  fs.rmSync(file, { force: true });
}

/** Removes everything a cluster holds: processes, mounts, namespaces, bridge, the FORWARD rule, files. */
export async function down(layout) {
  // Every container killed first: dockerd would stop each within its grace period (10 s for one that
  // ignores SIGTERM, as a shell's exec'd httpd as PID 1 does), and past 20 s it is killed, its containers left running.
  await Promise.all(
    layout.nodes.map(async (node) => {
      const running = await engineGet(node, '/containers/json');
      if (Array.isArray(running)) await Promise.all(running.map((c) => engineCall(node, 'POST', `/containers/${encodeURIComponent(c.Id)}/kill`)));
    }),
  );
  // dockerd then (it stops what is left) with the registry beside it, then containerd; the nodes at once.
  await Promise.all(
    layout.nodes.map(async (node) => {
      await Promise.all([stopPid(path.join(node.dir, 'dockerd.pid')), stopPid(path.join(node.dir, 'registry.pid'))]);
      await stopPid(path.join(node.dir, 'containerd.pid'));
    }),
  );
  // Container shims left behind by a crashed run still hold mounts under the cluster's directory.
  for (const line of (quiet('ps', ['-eo', 'pid=,args=']) ?? '').split('\n')) {
    const match = /^\s*(\d+)\s+(.*)$/.exec(line);
    if (match !== null && match[2].includes(`${layout.dir}/`)) quiet('kill', ['-9', match[1]]);
  }
  const mounts = fs.readFileSync('/proc/mounts', 'utf8').split('\n');
  // Innermost first, all in one umount (it goes on past a target that fails).
  const targets = mounts.map((l) => l.split(' ')[1] ?? '').filter((t) => t.startsWith(`${layout.dir}/`)).reverse();
  if (targets.length > 0) quiet('umount', ['-l', ...targets]);
  for (const node of layout.nodes) quiet('ip', ['netns', 'del', node.netns]);
  quiet('ip', ['link', 'del', layout.bridge]);
  while (quiet('iptables', ['-C', ...layout.forwardRule]) !== undefined) quiet('iptables', ['-D', ...layout.forwardRule]);
  fs.rmSync(layout.dir, { recursive: true, force: true });
}

/** Whether a process is alive. */
function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Tears down every cluster whose owner process has ended (a crashed or killed earlier run). */
export async function sweepStale() {
  const ids = fs.existsSync(STATE_ROOT) ? fs.readdirSync(STATE_ROOT).filter((name) => /^\d+$/.test(name)) : [];
  for (const id of ids) {
    const owner = Number(quiet('cat', [path.join(STATE_ROOT, id, 'owner.pid')]) ?? '0');
    if (owner > 0 && alive(owner)) continue;
    if (owner === 0 && fs.existsSync(path.join(STATE_ROOT, id, 'manual'))) continue;
    await down(clusterLayout(Number(id)));
  }
}

function containerdConfig(node) {
  const d = node.dir;
  return `version = 2
root = "${d}/containerd/root"
state = "${d}/containerd/state"
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = "${d}/containerd.sock"
[ttrpc]
  address = "${d}/containerd.sock.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
`;
}

/** The registry's own configuration: plain HTTP on the manager's address, no htpasswd (the package's default has one). */
function registryConfig(node, registry) {
  return `version: 0.1
storage:
  filesystem:
    rootdirectory: ${node.dir}/registry
  delete:
    enabled: true
http:
  addr: ${registry}
log:
  level: warn
`;
}

/**
 * Brings a new cluster up, owned by `ownerPid` (torn down by a later sweep once that process has
 * ended; 0: kept until `down`). Resolves with its layout. Stale clusters of ended runs go first.
 */
export async function up(ownerPid = process.pid) {
  await sweepStale();
  fs.mkdirSync(STATE_ROOT, { recursive: true, mode: 0o700 });
  let layout;
  for (let attempt = 0; layout === undefined; attempt++) {
    const id = 1 + ((process.pid + attempt) % 250);
    try {
      fs.mkdirSync(path.join(STATE_ROOT, String(id)), { mode: 0o700 });
      layout = clusterLayout(id);
    } catch (err) {
      if (err.code !== 'EEXIST' || attempt > 250) throw err;
    }
  }
  fs.writeFileSync(path.join(layout.dir, 'owner.pid'), String(ownerPid));
  if (ownerPid === 0) fs.writeFileSync(path.join(layout.dir, 'manual'), '');
  try {
    await start(layout);
  } catch (err) {
    await down(layout);
    throw err;
  }
  return layout;
}

async function start(layout) {
  const { bridge, nodes, registry } = layout;
  sh('ip', ['link', 'add', bridge, 'type', 'bridge']);
  sh('ip', ['addr', 'add', `${layout.hostAddress}/24`, 'dev', bridge]);
  sh('ip', ['link', 'set', bridge, 'up']);
  sh('iptables', ['-I', ...layout.forwardRule]);
  const [manager, ...workers] = nodes;
  // Each node on its own (side by side): its namespace, its containerd, then its dockerd once containerd answers.
  await Promise.all(
    nodes.map(async (node) => {
      fs.mkdirSync(node.dir, { recursive: true });
      await shAsync('ip', ['netns', 'add', node.netns]);
      await shAsync('ip', ['link', 'add', node.hostEnd, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', node.netns]);
      await shAsync('ip', ['link', 'set', node.hostEnd, 'master', bridge, 'up']);
      await shAsync('ip', ['-n', node.netns, 'addr', 'add', `${node.address}/24`, 'dev', 'eth0']);
      await shAsync('ip', ['-n', node.netns, 'link', 'set', 'eth0', 'up']);
      await shAsync('ip', ['-n', node.netns, 'link', 'set', 'lo', 'up']);
      // No default route: nothing leaves the namespace (a node would otherwise try Docker Hub's DNS).
      if (node === manager) {
        // The registry needs only the manager's namespace: it starts while the engines do.
        fs.writeFileSync(path.join(manager.dir, 'registry.yml'), registryConfig(manager, registry));
        startIn(manager, 'registry', '/usr/bin/docker-registry', ['serve', path.join(manager.dir, 'registry.yml')]);
      }
      fs.writeFileSync(path.join(node.dir, 'containerd.toml'), containerdConfig(node));
      startIn(node, 'containerd', 'containerd', ['--config', path.join(node.dir, 'containerd.toml')]);
      await waitFor(`containerd of ${node.name}`, () => fs.existsSync(path.join(node.dir, 'containerd.sock')), 60_000);
      startIn(node, 'dockerd', 'dockerd', [
        '--host', `unix://${node.socket}`,
        '--containerd', path.join(node.dir, 'containerd.sock'),
        '--data-root', path.join(node.dir, 'data'),
        '--exec-root', path.join(node.dir, 'exec'),
        '--pidfile', path.join(node.dir, 'dockerd.engine.pid'),
        '--insecure-registry', registry,
        '--insecure-registry', layout.ownRegistry,
        '--log-level', 'warn',
        // Test apps need no grace: a cluster goes down in seconds.
        '--shutdown-timeout', '2',
      ]);
      await waitFor(`dockerd of ${node.name}`, async () => (await engineGet(node, '/_ping')) === 'OK', 120_000);
    }),
  );
  // A 2 s dispatcher heartbeat (docs/swarm.md recommends it): a lost node is declared down, and its
  // replicas started elsewhere, in about three beats instead of the default 5 s beat's 15–20 s.
  docker(manager, ['swarm', 'init', '--advertise-addr', manager.address, '--listen-addr', `${manager.address}:2377`, '--dispatcher-heartbeat', '2s']);
  const token = docker(manager, ['swarm', 'join-token', '-q', 'worker']).trim();
  await Promise.all(workers.map((worker) => shAsync('docker', ['-H', `unix://${worker.socket}`, 'swarm', 'join', '--token', token, '--advertise-addr', worker.address, '--listen-addr', `${worker.address}:2377`, `${manager.address}:2377`])));
  await waitFor('three ready nodes', async () => {
    const listed = await engineGet(manager, '/nodes');
    return Array.isArray(listed) && listed.filter((n) => n?.Status?.State === 'ready').length === 3;
  }, 120_000);
  await waitFor('the registry', () => quiet('nsenter', [`--net=/run/netns/${manager.netns}`, '--', 'wget', '-q', '-O', '/dev/null', `http://${registry}/v2/`]) !== undefined, 60_000);
}

/** The clusters under STATE_ROOT, with their node lists. */
export function status() {
  const ids = fs.existsSync(STATE_ROOT) ? fs.readdirSync(STATE_ROOT).filter((name) => /^\d+$/.test(name)) : [];
  if (ids.length === 0) return 'no swarm test cluster is running\n';
  return ids
    .map((id) => {
      const layout = clusterLayout(Number(id));
      return `cluster ${id}: manager unix://${layout.nodes[0].socket}, registry ${layout.registry}\n${quiet('docker', ['-H', `unix://${layout.nodes[0].socket}`, 'node', 'ls']) ?? '(not answering)\n'}`;
    })
    .join('');
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const [command, arg] = process.argv.slice(2);
  if (command === 'up') {
    const layout = await up(0);
    process.stdout.write(`swarm test cluster ${layout.id} up (remove it with: node scripts/swarm-cluster.mjs down ${layout.id})\n${status()}`);
  } else if (command === 'down' && arg !== undefined && /^\d+$/.test(arg)) {
    await down(clusterLayout(Number(arg)));
    process.stdout.write(`swarm test cluster ${arg} removed\n`);
  } else if (command === 'sweep') {
    await sweepStale();
  } else if (command === 'status') {
    process.stdout.write(status());
  } else {
    process.stderr.write('usage: node scripts/swarm-cluster.mjs up | down ID | sweep | status\n');
    process.exit(2);
  }
}
