// Benchmark (issue 36): image size and warm rebuild after a one-line change, generated Dockerfile vs a hand-written multi-stage one, for a Node and a Python app with vendored dependencies. Run: node dist/bench/nodockerfile.js [--runs 6]
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import Dockerode from 'dockerode';
import { createDockerEngine } from '../src/runtime/docker/docker-engine.js';
import { generateDockerfile } from '../src/stacks/generate-dockerfile.js';
import { readSourceTree } from '../src/stacks/read-source-tree.js';
import { DEFAULT_BASE_IMAGES } from '../src/stacks/stack-types.js';
import { TEST_BUILD_SANDBOX } from '../test/helpers/busybox-image.js';

const run = promisify(execFile);
const arg = (name: string, fallback: string): string => {
  const index = process.argv.indexOf(name);
  return index === -1 ? fallback : (process.argv[index + 1] ?? fallback);
};
// Even, so each variant goes first in half the rounds (on a loaded host the first build after a change is often slower).
const runs = Number(arg('--runs', '6'));
const images = { ...DEFAULT_BASE_IMAGES, node: 'slipway-stand-in/node:20', python: 'slipway-stand-in/python:3.11' };
const engine = createDockerEngine();
const docker = new Dockerode();

/** Some code of `kib` KiB, so the vendored dependencies weigh what small real ones do. */
const filler = (kib: number): string => `// filler\n${'exports.x = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";\n'.repeat(kib * 14)}`;

function write(dir: string, files: Record<string, string>): void {
  for (const [file, text] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
    fs.writeFileSync(path.join(dir, file), text);
  }
}

/** A Node app with three vendored dependencies (about 3 MiB of node_modules). */
function nodeApp(dir: string): { source: string; hand: string } {
  const files: Record<string, string> = {
    'package.json': JSON.stringify({ name: 'bench', scripts: { start: 'node server.js' }, dependencies: { alpha: '1.0.0', beta: '1.0.0', gamma: '1.0.0' } }),
    'server.js': "const a = require('alpha');\nrequire('http').createServer((req, res) => res.end('ok ' + a.x.length + '\\n')).listen(process.env.PORT);\n// line 0\n",
    'lib/util.js': 'module.exports = 1;\n',
  };
  for (const name of ['alpha', 'beta', 'gamma']) {
    files[`node_modules/${name}/package.json`] = JSON.stringify({ name, version: '1.0.0', main: 'index.js' });
    for (let i = 0; i < 20; i += 1) files[`node_modules/${name}/part${i}.js`] = filler(50);
    files[`node_modules/${name}/index.js`] = "exports.x = require('./part0.js').x;\n";
  }
  write(dir, files);
  const hand = [
    'FROM slipway-stand-in/node:20 AS deps',
    'WORKDIR /app',
    'COPY node_modules ./node_modules',
    '',
    'FROM slipway-stand-in/node:20',
    'WORKDIR /app',
    'ENV NODE_ENV=production',
    'COPY --from=deps /app/node_modules ./node_modules',
    'COPY package.json server.js ./',
    'COPY lib ./lib',
    'USER node',
    'ENV PORT=8080',
    'EXPOSE 8080',
    'CMD ["node", "server.js"]',
    '',
  ].join('\n');
  return { source: 'server.js', hand };
}

/** A Python app whose requirements install three wheels vendored in wheels/ (pip --no-index). */
async function pythonApp(dir: string): Promise<{ source: string; hand: string }> {
  write(dir, {
    'requirements.txt': '--no-index\n--find-links ./wheels\nalpha\nbeta\ngamma\n',
    'app.py': 'import http.server, os, alpha\n\nclass H(http.server.BaseHTTPRequestHandler):\n    def do_GET(self):\n        self.send_response(200)\n        self.end_headers()\n        self.wfile.write(b"ok\\n")\n\nhttp.server.HTTPServer(("", int(os.environ["PORT"])), H).serve_forever()\n# line 0\n',
  });
  // The wheels are made by the stand-in's Python (zipfile), so the bench needs nothing on the host.
  const script = [
    'import base64, hashlib, zipfile',
    'def digest(t):',
    '    return base64.urlsafe_b64encode(hashlib.sha256(t.encode()).digest()).rstrip(b"=").decode()',
    'for name in ("alpha", "beta", "gamma"):',
    '    files = {f"{name}/__init__.py": "X = 1\\n" + "Y = \\"%s\\"\\n" % ("0123456789abcdef" * 60000)}',
    '    info = f"{name}-1.0.dist-info"',
    '    files[f"{info}/METADATA"] = f"Metadata-Version: 2.1\\nName: {name}\\nVersion: 1.0\\n"',
    '    files[f"{info}/WHEEL"] = "Wheel-Version: 1.0\\nGenerator: bench\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n"',
    '    record = "".join("%s,sha256=%s,%d\\n" % (p, digest(t), len(t.encode())) for p, t in files.items()) + info + "/RECORD,,\\n"',
    '    files[f"{info}/RECORD"] = record',
    '    with zipfile.ZipFile(f"/w/{name}-1.0-py3-none-any.whl", "w", zipfile.ZIP_DEFLATED) as z:',
    '        for p, t in files.items(): z.writestr(p, t)',
  ].join('\n');
  fs.mkdirSync(path.join(dir, 'wheels'));
  await run('docker', ['run', '--rm', '--network', 'none', '--user', `${process.getuid?.() ?? 0}`, '-v', `${path.join(dir, 'wheels')}:/w`, '--', 'slipway-stand-in/python:3.11', 'python3', '-c', script]);
  const hand = [
    'FROM slipway-stand-in/python:3.11 AS deps',
    'ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1',
    'WORKDIR /app',
    'RUN python -m venv /opt/venv',
    'ENV PATH=/opt/venv/bin:$PATH',
    'COPY requirements.txt ./',
    'COPY wheels ./wheels',
    'RUN pip install -r requirements.txt',
    '',
    'FROM slipway-stand-in/python:3.11',
    'ENV PYTHONUNBUFFERED=1 PATH=/opt/venv/bin:$PATH',
    'WORKDIR /app',
    'COPY --from=deps /opt/venv /opt/venv',
    'COPY app.py ./',
    'USER 10001:10001',
    'ENV PORT=8080',
    'EXPOSE 8080',
    'CMD ["python", "app.py"]',
    '',
  ].join('\n');
  return { source: 'app.py', hand };
}

async function build(dir: string, tag: string, dockerfileText: string | undefined): Promise<number> {
  const started = performance.now();
  await engine.buildImage({
    contextDir: dir,
    dockerfile: 'Dockerfile',
    tag,
    labels: {},
    signal: AbortSignal.timeout(900_000),
    onOutput: () => undefined,
    sandbox: TEST_BUILD_SANDBOX,
    ...(dockerfileText === undefined ? {} : { dockerfileText }),
  });
  return (performance.now() - started) / 1000;
}

const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[mid] ?? Number.NaN) : ((sorted[mid - 1] ?? Number.NaN) + (sorted[mid] ?? Number.NaN)) / 2;
};

async function measure(stack: 'node' | 'python'): Promise<void> {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), `slipway-bench-nodockerfile-${stack}-`));
  const tags: string[] = [];
  try {
    const dirs = { generated: path.join(root, 'generated'), hand: path.join(root, 'hand') };
    let source = '';
    for (const [variant, dir] of Object.entries(dirs)) {
      fs.mkdirSync(dir);
      const app = stack === 'node' ? nodeApp(dir) : await pythonApp(dir);
      source = app.source;
      if (variant === 'hand') fs.writeFileSync(path.join(dir, 'Dockerfile'), app.hand);
    }
    const generated = generateDockerfile(readSourceTree(dirs.generated), { images, dockerfilePath: 'Dockerfile' }).dockerfile;
    const tag = (variant: string): string => `slipway-bench-nodockerfile/${stack}-${variant}:${process.pid}`;
    const text = (variant: string): string | undefined => (variant === 'generated' ? generated : undefined);
    // Cold builds first (not compared: they fill the cache), then one-line changes, the two variants interleaved.
    for (const [variant, dir] of Object.entries(dirs)) {
      tags.push(tag(variant));
      await build(dir, tag(variant), text(variant));
    }
    const warm: Record<string, number[]> = { generated: [], hand: [] };
    for (let i = 1; i <= runs; i += 1) {
      const order = i % 2 === 0 ? ['hand', 'generated'] : ['generated', 'hand'];
      for (const variant of order) {
        const dir = dirs[variant as keyof typeof dirs];
        const file = path.join(dir, source);
        fs.writeFileSync(file, fs.readFileSync(file, 'utf8').replace(/# line \d+|\/\/ line \d+/, (m) => `${m.startsWith('#') ? '#' : '//'} line ${i}`));
        warm[variant]?.push(await build(dir, tag(variant), text(variant)));
      }
    }
    const size = async (variant: string): Promise<number> => (await docker.getImage(tag(variant)).inspect()).Size;
    const [genSize, handSize] = [await size('generated'), await size('hand')];
    const [genWarm, handWarm] = [median(warm['generated'] ?? []), median(warm['hand'] ?? [])];
    console.log(
      `${stack}: image ${(genSize / 1e6).toFixed(1)} MB generated / ${(handSize / 1e6).toFixed(1)} MB hand-written = ×${(genSize / handSize).toFixed(3)}; ` +
        `warm rebuild (median of ${runs}) ${genWarm.toFixed(2)} s / ${handWarm.toFixed(2)} s = ×${(genWarm / handWarm).toFixed(2)} ` +
        `[generated ${warm['generated']?.map((s) => s.toFixed(2)).join(', ')}; hand ${warm['hand']?.map((s) => s.toFixed(2)).join(', ')}]`,
    );
  } finally {
    for (const tag of tags) await engine.removeImage(tag).catch(() => undefined);
    fs.rmSync(root, { recursive: true, force: true });
  }
}

const { stdout } = await run('cat', ['/proc/loadavg']);
console.log(`load average at start: ${stdout.trim().split(' ').slice(0, 3).join(' ')}`);
await measure('node');
await measure('python');
