// `npm run stand-in-images [-- NAME…]`: builds local images that keep the official images' contracts
// (decisions §19, §24) from Debian's packages alone, for machines without a registry and for tests.
// Plain Node (no dependencies). Each root filesystem is made on the host by Debian's mmdebstrap from
// the host's apt sources; the image build itself (FROM scratch) never reaches the network.
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const filesDir = path.join(here, 'stand-ins');

/** The label holding the hash of an image's recipe; an image with the same hash is up to date. */
export const RECIPE_LABEL = 'dev.slipway.stand-in.recipe';
const SUITE = 'bookworm';
const BASE_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

// Documentation, manual pages and translations are removed from every root filesystem. (A hook, not
// dpkg's path-exclude: with that, mmdebstrap pipes each essential package through a Python filter,
// a minute more on a busy machine.)
const CLEANUP_HOOK =
  'rm -rf "$1/usr/share/man" "$1/usr/share/info"' +
  ' && find "$1/usr/share/doc" -mindepth 1 ! -type d ! -name copyright -delete' +
  ' && find "$1/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} +';

/** A file of scripts/stand-ins, read for the build context (and the recipe hash). */
function standInFile(name) {
  return fs.readFileSync(path.join(filesDir, name), 'utf8');
}

function dockerfile(lines) {
  return ['FROM scratch', 'ADD rootfs.tar /', ...lines, ''].join('\n');
}

/**
 * The recipes, in build order (the databases first). `packages` go to mmdebstrap's --include;
 * `essentialHooks` run before they are installed and `customizeHooks` after (mmdebstrap runs them
 * with sh, the root filesystem's path as $1; they are fixed text, never built from input);
 * `files` join the build context; `node` copies the Node.js that runs this script.
 */
export function recipes() {
  return [
    {
      name: 'postgres',
      tag: 'slipway-stand-in/postgres:15',
      packages: ['postgresql-15', 'postgresql-client-15'],
      // No "main" cluster from the package's postinst: the entrypoint makes $PGDATA.
      essentialHooks: [
        'mkdir -p "$1/etc/postgresql-common/createcluster.d" && echo "create_main_cluster = false" > "$1/etc/postgresql-common/createcluster.d/slipway-stand-in.conf"',
      ],
      customizeHooks: [
        'chroot "$1" install -d -o postgres -g postgres -m 3777 /var/run/postgresql',
        'chroot "$1" install -d -o postgres -g postgres -m 700 /var/lib/postgresql/data',
        'mkdir -p "$1/docker-entrypoint-initdb.d"',
      ],
      files: { 'docker-entrypoint.sh': standInFile('postgres-entrypoint.sh') },
      dockerfile: dockerfile([
        'COPY docker-entrypoint.sh /usr/local/bin/docker-entrypoint.sh',
        `ENV PG_MAJOR=15 PATH=/usr/lib/postgresql/15/bin:${BASE_PATH} PGDATA=/var/lib/postgresql/data LANG=C.UTF-8`,
        'VOLUME /var/lib/postgresql/data',
        'ENTRYPOINT ["docker-entrypoint.sh"]',
        // Fast shutdown, as the official image: SIGTERM would wait for every client to leave.
        'STOPSIGNAL SIGINT',
        'EXPOSE 5432',
        'CMD ["postgres"]',
      ]),
    },
    {
      name: 'mariadb',
      tag: 'slipway-stand-in/mariadb:10.11',
      packages: ['mariadb-server', 'mariadb-client'],
      // The package's postinst initialises /var/lib/mysql: empty it, so the entrypoint sets up users.
      customizeHooks: [
        'rm -rf "$1/var/lib/mysql" && chroot "$1" install -d -o mysql -g mysql -m 755 /var/lib/mysql',
        'chroot "$1" install -d -o mysql -g mysql -m 755 /run/mysqld',
        'mkdir -p "$1/docker-entrypoint-initdb.d"',
      ],
      files: {
        'docker-entrypoint.sh': standInFile('mariadb-entrypoint.sh'),
        'slipway-stand-in.cnf': standInFile('mariadb-server.cnf'),
      },
      dockerfile: dockerfile([
        'COPY docker-entrypoint.sh /usr/local/bin/docker-entrypoint.sh',
        'COPY slipway-stand-in.cnf /etc/mysql/mariadb.conf.d/99-slipway-stand-in.cnf',
        'ENV LANG=C.UTF-8',
        'VOLUME /var/lib/mysql',
        'ENTRYPOINT ["docker-entrypoint.sh"]',
        'EXPOSE 3306',
        'CMD ["mariadbd"]',
      ]),
    },
    {
      name: 'redis',
      tag: 'slipway-stand-in/redis:7',
      packages: ['redis-server', 'redis-tools'],
      customizeHooks: ['chroot "$1" install -d -o redis -g redis -m 755 /data'],
      files: { 'docker-entrypoint.sh': standInFile('redis-entrypoint.sh') },
      dockerfile: dockerfile([
        'COPY docker-entrypoint.sh /usr/local/bin/docker-entrypoint.sh',
        'VOLUME /data',
        'WORKDIR /data',
        'ENTRYPOINT ["docker-entrypoint.sh"]',
        'EXPOSE 6379',
        'CMD ["redis-server"]',
      ]),
    },
    {
      name: 'node',
      tag: 'slipway-stand-in/node:20',
      // node's own shared libraries (libstdc++) and the certificates npm uses.
      packages: ['libstdc++6', 'ca-certificates'],
      customizeHooks: ['chroot "$1" useradd --uid 1000 --user-group --create-home --shell /bin/bash node'],
      node: true,
      dockerfile: dockerfile([
        'COPY node/ /usr/local/',
        'ENV LANG=C.UTF-8',
        'CMD ["node"]',
      ]),
    },
    {
      name: 'python',
      tag: 'slipway-stand-in/python:3.11',
      packages: ['python3', 'python3-venv', 'python3-pip', 'python-is-python3', 'ca-certificates'],
      // The official image lets `pip install` write to the system Python; Debian's marker forbids it.
      customizeHooks: ['rm -f "$1"/usr/lib/python3.*/EXTERNALLY-MANAGED'],
      dockerfile: dockerfile([
        'ENV LANG=C.UTF-8',
        'CMD ["python3"]',
      ]),
    },
    {
      name: 'go',
      tag: 'slipway-stand-in/go:1.19',
      packages: ['golang-1.19-go', 'ca-certificates'],
      customizeHooks: ['mkdir -p "$1/go/src" "$1/go/bin" && chmod -R 1777 "$1/go"'],
      dockerfile: dockerfile([
        `ENV GOLANG_VERSION=1.19 GOPATH=/go PATH=/go/bin:/usr/lib/go-1.19/bin:${BASE_PATH}`,
        'WORKDIR /go',
        'CMD ["bash"]',
      ]),
    },
    {
      name: 'debian',
      tag: 'slipway-stand-in/debian:bookworm',
      packages: [],
      dockerfile: dockerfile(['CMD ["bash"]']),
    },
  ];
}

/** The Node.js running this script, with npm and corepack from its installation when present. */
function nodeInstallation() {
  const binary = process.execPath;
  const modules = [path.resolve(binary, '..', '..', 'lib', 'node_modules'), '/usr/lib/node_modules', '/usr/local/lib/node_modules'];
  const found = {};
  for (const tool of ['npm', 'corepack']) {
    const dir = modules.map((m) => path.join(m, tool)).find((d) => fs.existsSync(path.join(d, 'package.json')));
    if (dir !== undefined) found[tool] = { dir, version: JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8')).version };
  }
  return { binary, version: process.version, tools: found };
}

/** The hash of everything an image is made from; a change to any part rebuilds it. */
export function recipeHash(recipe) {
  const input = {
    suite: SUITE,
    packages: recipe.packages,
    cleanup: CLEANUP_HOOK,
    essentialHooks: recipe.essentialHooks ?? [],
    customizeHooks: recipe.customizeHooks ?? [],
    files: recipe.files ?? {},
    dockerfile: recipe.dockerfile,
    node: recipe.node ? (({ version, tools }) => ({ version, tools: Object.fromEntries(Object.entries(tools).map(([k, v]) => [k, v.version])) }))(nodeInstallation()) : null,
  };
  return createHash('sha256').update(JSON.stringify(input)).digest('hex');
}

/** Runs a program with an argv array; resolves with its exit code and the end of its output. */
function execute(cmd, args, { verbose = false, timeoutMs = 1_800_000, env = process.env, onOutput = () => {} } = {}) {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], env });
    let output = '';
    const keep = (chunk) => {
      if (verbose) process.stderr.write(chunk);
      output = (output + chunk.toString()).slice(-20_000);
      onOutput(output);
    };
    child.stdout.on('data', keep);
    child.stderr.on('data', keep);
    const timer = setTimeout(() => child.kill('SIGTERM'), timeoutMs);
    child.once('error', (err) => { clearTimeout(timer); resolve({ code: -1, output: err.message }); });
    child.once('close', (code, signal) => { clearTimeout(timer); resolve({ code: code ?? -1, signal, output }); });
  });
}

/** The recipe hash on an image in the engine, or null when it has none (or no such image). */
async function labelOf(tag) {
  const { code, output } = await execute('docker', ['image', 'inspect', '--format', `{{ index .Config.Labels "${RECIPE_LABEL}" }}`, '--', tag], { timeoutMs: 60_000 });
  return code === 0 ? output.trim() : null;
}

/**
 * Where mmdebstrap downloads from: `--mirror` arguments first, else the host's own apt sources for
 * Debian bookworm (files of /etc/apt that name the suite and a Debian archive), else deb.debian.org.
 */
export function mirrors(explicit = []) {
  if (explicit.length > 0) return explicit;
  const candidates = [];
  if (fs.existsSync('/etc/apt/sources.list')) candidates.push('/etc/apt/sources.list');
  const dir = '/etc/apt/sources.list.d';
  if (fs.existsSync(dir)) {
    for (const name of fs.readdirSync(dir).sort()) {
      if (name.endsWith('.list') || name.endsWith('.sources')) candidates.push(path.join(dir, name));
    }
  }
  const usable = candidates.filter((file) => {
    const text = fs.readFileSync(file, 'utf8').split('\n').filter((line) => !line.trim().startsWith('#')).join('\n');
    return new RegExp(`\\b${SUITE}\\b`).test(text) && /\/debian(-security)?\/?(\s|$)/m.test(text);
  });
  return usable.length > 0 ? usable : ['http://deb.debian.org/debian'];
}

function seconds(since) {
  return `${((Date.now() - since) / 1000).toFixed(1)} s`;
}

/** Copies the running Node.js (and npm, corepack) into `dir` laid out like /usr/local. */
function copyNode(dir) {
  const { binary, tools } = nodeInstallation();
  fs.mkdirSync(path.join(dir, 'bin'), { recursive: true });
  fs.copyFileSync(binary, path.join(dir, 'bin', 'node'));
  fs.chmodSync(path.join(dir, 'bin', 'node'), 0o755);
  const links = { npm: ['npm', 'bin/npm-cli.js'], npx: ['npm', 'bin/npx-cli.js'], corepack: ['corepack', 'dist/corepack.js'] };
  for (const [tool, { dir: source }] of Object.entries(tools)) {
    fs.cpSync(source, path.join(dir, 'lib', 'node_modules', tool), { recursive: true, verbatimSymlinks: true });
  }
  for (const [command, [tool, entry]] of Object.entries(links)) {
    if (tools[tool] !== undefined) fs.symlinkSync(`../lib/node_modules/${tool}/${entry}`, path.join(dir, 'bin', command));
  }
}

/**
 * Builds one image (whether or not it is up to date). Resolves with `{name, tag, outcome: 'built',
 * seconds, size}` (size in MiB); throws with the tool's output when a step fails.
 */
export async function buildStandIn(recipe, { verbose = false, mirror = [], log = defaultLog } = {}) {
  const started = Date.now();
  const hash = recipeHash(recipe);
  log(`${recipe.tag}: building`);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `slipway-stand-in-${recipe.name}-`));
  try {
    const sources = mirrors(mirror);
    log(`${recipe.tag}: root filesystem from Debian ${SUITE} (mmdebstrap, ${recipe.packages.length > 0 ? recipe.packages.join(' ') : 'minbase only'}; sources: ${sources.join(', ')})`);
    const args = [
      '--variant=minbase',
      '--mode=root',
      '--format=tar',
      '--aptopt=APT::Install-Recommends "false"',
      ...(recipe.packages.length > 0 ? [`--include=${recipe.packages.join(',')}`] : []),
      ...(recipe.essentialHooks ?? []).map((hook) => `--essential-hook=${hook}`),
      ...[...(recipe.customizeHooks ?? []), CLEANUP_HOOK].map((hook) => `--customize-hook=${hook}`),
      '--',
      SUITE,
      path.join(dir, 'rootfs.tar'),
      ...sources,
    ];
    // The system PATH: mmdebstrap runs its helpers (mmtarfilter) through `env python3`, and a
    // version manager's shim first in PATH (pyenv) costs a second per package.
    // mmdebstrap takes minutes on a busy machine: say every 30 s which of its steps it is at.
    let step = 'starting';
    const ticker = verbose ? null : setInterval(() => log(`${recipe.tag}: mmdebstrap: ${step} (${seconds(started)} so far)`), 30_000);
    const onOutput = (text) => {
      const last = [...text.matchAll(/^I: (.+?)\.*$/gm)].at(-1)?.[1];
      if (last !== undefined) step = last;
    };
    const rootfs = await execute('mmdebstrap', args, { verbose, onOutput, env: { ...process.env, PATH: BASE_PATH } }).finally(() => clearInterval(ticker));
    if (rootfs.code !== 0) {
      throw new Error(`${recipe.tag}: mmdebstrap failed (exit ${rootfs.code}${rootfs.signal ? `, ${rootfs.signal}` : ''}). Its last output:\n${rootfs.output.slice(-3000)}\nIt downloads from ${sources.join(', ')}: on a host without that mirror, pass --mirror URL (a local Debian mirror).`);
    }
    log(`${recipe.tag}: root filesystem ready (${(fs.statSync(path.join(dir, 'rootfs.tar')).size / 1048576).toFixed(0)} MiB) after ${seconds(started)}`);
    for (const [name, text] of Object.entries(recipe.files ?? {})) {
      fs.writeFileSync(path.join(dir, name), text, { mode: name.endsWith('.sh') ? 0o755 : 0o644 });
    }
    if (recipe.node) copyNode(path.join(dir, 'node'));
    fs.writeFileSync(path.join(dir, 'Dockerfile'), recipe.dockerfile);
    log(`${recipe.tag}: image (docker build, FROM scratch)`);
    const built = await execute('docker', [
      'build', '--network=none', '--tag', recipe.tag,
      '--label', `${RECIPE_LABEL}=${hash}`,
      '--label', `dev.slipway.stand-in=built by npm run stand-in-images from Debian ${SUITE} packages`,
      '--', dir,
    ], { verbose });
    if (built.code !== 0) throw new Error(`${recipe.tag}: docker build failed (exit ${built.code}). Its last output:\n${built.output.slice(-3000)}`);
    const size = await execute('docker', ['image', 'inspect', '--format', '{{ .Size }}', '--', recipe.tag], { timeoutMs: 60_000 });
    const mib = Number.parseInt(size.output.trim(), 10) / 1048576;
    log(`${recipe.tag}: built in ${seconds(started)} (${mib.toFixed(0)} MiB)`);
    return { name: recipe.name, tag: recipe.tag, outcome: 'built', seconds: (Date.now() - started) / 1000, size: mib };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

function defaultLog(message) {
  process.stderr.write(`[stand-in-images] ${message}\n`);
}

/** True when mmdebstrap is installed (in PATH or the usual places). */
function hasMmdebstrap() {
  const dirs = [...(process.env.PATH ?? '').split(':'), '/usr/bin', '/usr/local/bin'];
  return dirs.some((dir) => dir !== '' && fs.existsSync(path.join(dir, 'mmdebstrap')));
}

/**
 * Builds the named stand-ins (all when `names` is empty), skipping those up to date. Installs
 * mmdebstrap (Debian, root) only when something must be built.
 */
export async function ensureStandInImages(names = [], options = {}) {
  const log = options.log ?? defaultLog;
  const all = recipes();
  const unknown = names.filter((name) => !all.some((r) => r.name === name || r.tag === name));
  if (unknown.length > 0) throw new Error(`unknown stand-in image ${unknown.join(', ')}; the names are ${all.map((r) => r.name).join(', ')}`);
  const chosen = names.length === 0 ? all : all.filter((r) => names.includes(r.name) || names.includes(r.tag));
  const results = [];
  const upToDate = async (recipe) => !options.force && (await labelOf(recipe.tag)) === recipeHash(recipe);
  for (const recipe of chosen) {
    if (await upToDate(recipe)) {
      log(`${recipe.tag}: up to date`);
      results.push({ name: recipe.name, tag: recipe.tag, outcome: 'up to date', seconds: 0 });
      continue;
    }
    if (!hasMmdebstrap()) {
      const { aptInstall } = await import(pathToFileURL(path.join(here, 'setup.mjs')).href);
      aptInstall(['mmdebstrap']);
    }
    // Another run (a parallel `npm test`) may be building it: wait for it, then look again.
    const result = await withBuildLock(log, async () => {
      if (await upToDate(recipe)) {
        log(`${recipe.tag}: up to date (built by another run meanwhile)`);
        return { name: recipe.name, tag: recipe.tag, outcome: 'up to date', seconds: 0 };
      }
      return buildStandIn(recipe, { ...options, log });
    });
    results.push(result);
  }
  return results;
}

function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return err.code === 'EPERM';
  }
}

/**
 * Runs `fn` holding a lock file in the temporary directory (its content: the holder's pid), so
 * runs on one machine build one image at a time instead of all of them at once; a lock whose
 * process is gone is taken over.
 */
async function withBuildLock(log, fn) {
  const file = path.join(os.tmpdir(), 'slipway-stand-in-images.lock');
  let announced = false;
  for (;;) {
    try {
      fs.writeFileSync(file, String(process.pid), { flag: 'wx' });
      break;
    } catch (err) {
      if (err.code !== 'EEXIST') throw err;
    }
    let pid = Number.NaN;
    try { pid = Number.parseInt(fs.readFileSync(file, 'utf8'), 10); } catch { continue; }
    if (!Number.isInteger(pid) || !alive(pid)) {
      fs.rmSync(file, { force: true });
      continue;
    }
    if (!announced) log(`waiting for another stand-in build (process ${pid}) to finish…`);
    announced = true;
    await new Promise((resolve) => setTimeout(resolve, 2000));
  }
  try {
    return await fn();
  } finally {
    fs.rmSync(file, { force: true });
  }
}

const USAGE = `usage: npm run stand-in-images [-- [--force] [--verbose] [--mirror URL|FILE]… [NAME…]]
Builds local images keeping the official images' contracts from Debian ${SUITE} packages:
${recipes().map((r) => `  ${r.name.padEnd(9)}${r.tag}`).join('\n')}
An image already built from the same recipe is skipped. --mirror replaces the host's apt sources.`;

async function main(argv) {
  const names = [];
  const mirror = [];
  let force = false;
  let verbose = false;
  for (let i = 0; i < argv.length; i += 1) {
    const arg = argv[i];
    if (arg === '--force') force = true;
    else if (arg === '--verbose') verbose = true;
    else if (arg === '--mirror' && argv[i + 1] !== undefined) mirror.push(argv[(i += 1)]);
    else if (arg === '--help' || arg === '-h') { process.stdout.write(`${USAGE}\n`); return 0; }
    else if (arg.startsWith('-')) { process.stderr.write(`unknown option ${arg}\n${USAGE}\n`); return 2; }
    else names.push(arg);
  }
  const started = Date.now();
  try {
    const results = await ensureStandInImages(names, { force, verbose, mirror });
    const built = results.filter((r) => r.outcome === 'built');
    defaultLog(`${results.length} image(s): ${built.length} built, ${results.length - built.length} up to date, in ${seconds(started)}`);
    return 0;
  } catch (err) {
    defaultLog(err instanceof Error ? err.message : String(err));
    return 1;
  }
}

if (process.argv[1] !== undefined && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  process.exitCode = await main(process.argv.slice(2));
}
