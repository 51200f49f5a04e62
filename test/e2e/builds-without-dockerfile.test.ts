// End to end on the real engine: sources without a Dockerfile (Node, Python, Go, a static site) built from the generated one, served through the edge.
import assert from 'node:assert/strict';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { appRequest, createArchiveApp, deployAndWait, tarGzOf, tempDir, upload } from '../helpers/apps.js';
import { BUSYBOX_IMAGE, ensureBusyboxImage } from '../helpers/busybox-image.js';
import { testEngine } from '../helpers/apps.js';
import { startTestServer, type HttpResult, type TestServer } from '../helpers/server.js';

/** A folder's archive from a map of path → text. */
async function archiveOf(files: Record<string, string>): Promise<Buffer> {
  const dir = tempDir('stack');
  try {
    for (const [file, text] of Object.entries(files)) {
      await fsp.mkdir(path.dirname(path.join(dir, file)), { recursive: true });
      await fsp.writeFile(path.join(dir, file), text);
    }
    return await tarGzOf(dir);
  } finally {
    await fsp.rm(dir, { recursive: true, force: true });
  }
}

/** A Node app with one vendored dependency (node_modules in the source): nothing to download. */
const nodeApp = (greeting: string): Record<string, string> => ({
  'package.json': JSON.stringify({ name: 'hello', scripts: { start: 'node server.js' }, dependencies: { shout: '1.0.0' } }),
  'node_modules/shout/package.json': JSON.stringify({ name: 'shout', version: '1.0.0', main: 'index.js' }),
  'node_modules/shout/index.js': 'module.exports = (s) => s.toUpperCase();\n',
  'server.js': `const shout = require('shout');\nrequire('http').createServer((req, res) => res.end(shout('${greeting}') + ' as ' + process.getuid() + '\\n')).listen(process.env.PORT);\n`,
});

const APPS: Record<string, Record<string, string>> = {
  node: nodeApp('hello from node'),
  python: {
    'requirements.txt': '# the standard library is enough\n',
    'app.py': 'import http.server, os\n\nclass H(http.server.BaseHTTPRequestHandler):\n    def do_GET(self):\n        self.send_response(200)\n        self.end_headers()\n        self.wfile.write(b"hello from python\\n")\n\nhttp.server.HTTPServer(("", int(os.environ["PORT"])), H).serve_forever()\n',
  },
  go: {
    'go.mod': 'module example.com/hello\n\ngo 1.19\n',
    'cmd/hello/main.go': 'package main\n\nimport (\n\t"fmt"\n\t"net/http"\n\t"os"\n)\n\nfunc main() {\n\thttp.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "hello from go\\n") })\n\t_ = http.ListenAndServe(":"+os.Getenv("PORT"), nil)\n}\n',
  },
  static: { 'index.html': 'hello from a static site\n' },
  // No start and no main: the build's dist/ is the site. No dependencies, so nothing is installed.
  'node-build': {
    'package.json': JSON.stringify({ name: 'site', scripts: { build: 'node build.js' } }),
    'build.js': "const fs = require('fs');\nfs.mkdirSync('dist');\nfs.writeFileSync('dist/index.html', 'built by ' + process.argv0 + ' for a static site\\n');\n",
  },
};

describe('builds without a Dockerfile on the engine', () => {
  let ts: TestServer;
  let token: string;
  /** Each stack's deployment and its first build's answer, all built at once. */
  const deployed = new Map<string, Promise<{ id: string; subdomain: string; build: HttpResult }>>();

  before(async () => {
    await ensureBusyboxImage(testEngine());
    ts = await startTestServer({
      SLIPWAY_BASE_IMAGE_NODE: 'slipway-stand-in/node:20',
      SLIPWAY_BASE_IMAGE_PYTHON: 'slipway-stand-in/python:3.11',
      SLIPWAY_BASE_IMAGE_GO: 'slipway-stand-in/go:1.19',
      SLIPWAY_BASE_IMAGE_RUN: 'slipway-stand-in/debian:bookworm',
      SLIPWAY_BASE_IMAGE_STATIC: BUSYBOX_IMAGE,
      // Nothing is downloaded: the builds have no network at all.
      SLIPWAY_BUILD_NETWORK: 'none',
      SLIPWAY_MAX_CONCURRENT_BUILDS: '4',
      SLIPWAY_BUILD_TIMEOUT_SECONDS: '600',
    });
    token = (await ts.newUser('stacks')).token;
    for (const [stack, files] of Object.entries(APPS)) {
      const start = async () => {
        const app = await createArchiveApp(ts, token, await archiveOf(files));
        return { ...app, build: await deployAndWait(ts, token, app.id) };
      };
      const started = start();
      started.catch(() => undefined);
      deployed.set(stack, started);
    }
  });
  after(async () => {
    await ts.close();
  });

  const logOf = async (id: string, buildId: string): Promise<string> => (await ts.request('GET', `/api/v1/deployments/${id}/builds/${buildId}/logs`, { token })).text;

  /** Waits for a stack's first build, asserts it succeeded, and that the edge serves `body`. */
  async function served(stack: string, body: RegExp): Promise<{ id: string; buildId: string }> {
    const app = await deployed.get(stack);
    assert.ok(app !== undefined);
    assert.equal(app.build.json?.status, 'succeeded', `${stack}: ${app.build.text}\n${await logOf(app.id, app.build.json?.id)}`);
    const answer = await appRequest(ts.port, app.subdomain);
    assert.equal(answer.status, 200);
    assert.match(answer.body, body);
    return { id: app.id, buildId: app.build.json.id as string };
  }

  test('node: detected and why in the log, served as a non-root user, its Dockerfile shown; a source-only change reuses the dependency layer', async () => {
    const { id, buildId } = await served('node', /^HELLO FROM NODE as 1000\n$/);
    const log = await logOf(id, buildId);
    assert.match(log, /Dockerfile not found at "Dockerfile" in the source: detecting the stack/);
    assert.match(log, /==> detected a Node\.js app:\n==>   - package\.json at the root\n==>   - node_modules\/ is in the source/);
    assert.match(log, /scripts\.start "node server\.js" → node server\.js/);

    const text = await ts.request('GET', `/api/v1/deployments/${id}/builds/${buildId}/dockerfile`, { token });
    assert.equal(text.status, 200);
    assert.match(text.headers.get('content-type') ?? '', /^text\/plain/);
    assert.equal(text.headers.get('x-slipway-dockerfile-generated'), 'true');
    assert.match(text.text, /^# Generated by Slipway for a Node\.js app/);
    assert.match(text.text, /\nFROM slipway-stand-in\/node:20 AS deps\n/);
    assert.match(text.text, /\nUSER node\n/);
    const json = await ts.request('GET', `/api/v1/deployments/${id}/builds/${buildId}/dockerfile`, { token, headers: { accept: 'application/json' } });
    assert.equal(json.json.generated, true);
    assert.equal(json.json.path, 'Dockerfile');
    assert.equal(json.json.dockerfile, text.text);
    assert.equal(json.json.detection[0], 'detected a Node.js app:');

    // One line of the source changes: the vendored dependencies' layer comes from the cache.
    assert.equal((await upload(ts, token, id, await archiveOf(nodeApp('hello again')))).status, 200);
    const again = await deployAndWait(ts, token, id);
    assert.equal(again.json.status, 'succeeded');
    const rebuilt = await logOf(id, again.json.id);
    assert.match(rebuilt, /COPY node_modules \.\/node_modules\n\s*---> Using cache/);
    assert.match((await appRequest(ts.port, (await deployed.get('node'))?.subdomain ?? '')).body, /^HELLO AGAIN/);

    // Another user cannot read it.
    const other = await ts.newUser('stacks-other');
    assert.equal((await ts.request('GET', `/api/v1/deployments/${id}/builds/${buildId}/dockerfile`, { token: other.token })).status, 404);
  });

  test('python: requirements.txt and app.py, served', async () => {
    const { id, buildId } = await served('python', /^hello from python\n$/);
    assert.match(await logOf(id, buildId), /app\.py at the root \(no Procfile, no WSGI or ASGI app found\) → python app\.py/);
  });

  test('go: go.mod and cmd/hello, a static binary on the run image, served', async () => {
    const { id, buildId } = await served('go', /^hello from go\n$/);
    const dockerfile = (await ts.request('GET', `/api/v1/deployments/${id}/builds/${buildId}/dockerfile`, { token })).text;
    assert.match(dockerfile, /\nFROM slipway-stand-in\/debian:bookworm\nCOPY --from=build \/out\/hello \/usr\/local\/bin\/hello\n/);
  });

  test('static: index.html served by busybox, without the Dockerfile', async () => {
    const app = await deployed.get('static');
    await served('static', /^hello from a static site\n$/);
    assert.equal((await appRequest(ts.port, app?.subdomain ?? '', { path: '/Dockerfile' })).status, 404);
  });

  test('node without start or main: the build runs, and its dist/ is served by the static image', async () => {
    const { id, buildId } = await served('node-build', /^built by node for a static site\n$/);
    const log = await logOf(id, buildId);
    assert.match(log, /scripts\.build "node build\.js" → runs in the build stage\n/);
    assert.match(log, /no start script and no main → the build's output \(dist\/, else build\/\) is served as a static site\n/);
    const dockerfile = (await ts.request('GET', `/api/v1/deployments/${id}/builds/${buildId}/dockerfile`, { token })).text;
    assert.ok(dockerfile.includes(`\nFROM ${BUSYBOX_IMAGE}\nCOPY --from=build /srv/www /srv/www\n`), dockerfile);
  });

  test('two stacks at the root: the log says how to choose, and the variable it names does choose', async () => {
    const twoStacks = await archiveOf({
      'requirements.txt': '',
      'app.py': 'raise SystemExit("the python side was chosen")\n',
      'package.json': JSON.stringify({ name: 'both', scripts: { start: 'node server.js' } }),
      'server.js': "require('http').createServer((req, res) => res.end('the node side\\n')).listen(process.env.PORT);\n",
    });
    const { id, subdomain } = await createArchiveApp(ts, token, twoStacks);
    // As the note of a first build without it says: `SLIPWAY_STACK=<python|node>` on the deployment.
    const set = await ts.request('PATCH', `/api/v1/deployments/${id}/env`, { token, body: { vars: { SLIPWAY_STACK: 'node' } } });
    assert.equal(set.status, 200, set.text);
    const built = await deployAndWait(ts, token, id);
    assert.equal(built.json?.status, 'succeeded', built.text);
    assert.match(await logOf(id, built.json.id), /==> {3}note: several stacks at the root \(python, node\): node chosen by SLIPWAY_STACK\n/);
    assert.equal((await appRequest(ts.port, subdomain)).body, 'the node side\n');
  });

  test('a source with neither a Dockerfile nor a known stack fails naming what was looked for; its own Dockerfile is recorded as is', async () => {
    const { id } = await createArchiveApp(ts, token, await archiveOf({ 'README.md': '# nothing to run\n' }));
    const failed = await deployAndWait(ts, token, id);
    assert.equal(failed.status, 500);
    assert.equal(failed.json.error, 'build_failed');
    const looked = /no Dockerfile and no known stack in the source: looked for package\.json \(Node\.js\), requirements\.txt or pyproject\.toml \(Python\), go\.mod \(Go\), index\.html/;
    assert.match(failed.json.message, looked);
    const [build] = (await ts.request('GET', `/api/v1/deployments/${id}/builds`, { token })).json;
    assert.equal(build.status, 'failed');
    assert.match(build.error, looked);
    assert.equal((await ts.request('GET', `/api/v1/deployments/${id}/builds/${build.id}/dockerfile`, { token })).status, 404);

    const own = `FROM ${BUSYBOX_IMAGE}\nCMD ["sh", "-c", "exec httpd -f -p $PORT -h /"]\n`;
    assert.equal((await upload(ts, token, id, await archiveOf({ Dockerfile: own }))).status, 200);
    const built = await deployAndWait(ts, token, id);
    assert.equal(built.json.status, 'succeeded', built.text);
    const json = await ts.request('GET', `/api/v1/deployments/${id}/builds/${built.json.id}/dockerfile`, { token, headers: { accept: 'application/json' } });
    assert.deepEqual(json.json, { path: 'Dockerfile', generated: false, detection: null, dockerfile: own });
  });
});
