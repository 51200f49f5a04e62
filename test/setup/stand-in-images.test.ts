// The stand-in images (`npm run stand-in-images`, decisions §19, §24): tagged exactly, labelled with
// their recipe, skipped when up to date; the language and base images run their tools in real
// containers with no network (the database images: stand-in-databases.test.ts).
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { describe, test } from 'node:test';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { PROJECT_ROOT } from '../helpers/server.js';

const run = promisify(execFile);
const SCRIPT = path.join(PROJECT_ROOT, 'scripts', 'stand-in-images.mjs');

interface Recipe {
  name: string;
  tag: string;
}
interface StandIns {
  RECIPE_LABEL: string;
  recipes(): Recipe[];
  recipeHash(recipe: Recipe): string;
  mirrors(explicit?: string[]): string[];
}

const standIns = (await import(pathToFileURL(SCRIPT).href)) as StandIns;

async function docker(args: string[], timeout = 120_000): Promise<string> {
  const { stdout } = await run('docker', args, { timeout, maxBuffer: 16 * 1024 * 1024 });
  return stdout;
}
test('every stand-in image is built, tagged exactly, and labelled with the hash of its recipe', async () => {
  const tags = standIns.recipes().map((r) => r.tag);
  assert.deepEqual(tags, [
    'slipway-stand-in/postgres:15',
    'slipway-stand-in/mariadb:10.11',
    'slipway-stand-in/redis:7',
    'slipway-stand-in/node:20',
    'slipway-stand-in/python:3.11',
    'slipway-stand-in/go:1.19',
    'slipway-stand-in/debian:bookworm',
  ]);
  for (const recipe of standIns.recipes()) {
    const label = await docker(['image', 'inspect', '--format', `{{ index .Config.Labels "${standIns.RECIPE_LABEL}" }}`, '--', recipe.tag]).catch(() => '');
    assert.equal(label.trim(), standIns.recipeHash(recipe), `${recipe.tag} is built from its current recipe (npm run stand-in-images)`);
  }
});

test('a second run skips the images already built from the same recipe, and an unknown name is refused', async () => {
  const { stderr } = await run(process.execPath, [SCRIPT, 'redis', 'debian'], { timeout: 120_000 });
  assert.match(stderr, /slipway-stand-in\/redis:7: up to date/);
  assert.match(stderr, /slipway-stand-in\/debian:bookworm: up to date/);
  assert.match(stderr, /2 image\(s\): 0 built, 2 up to date/);
  assert.doesNotMatch(stderr, /: building/);
  const refused = await run(process.execPath, [SCRIPT, 'oracle'], { timeout: 60_000 }).then(
    () => null,
    (err: { code: number; stderr: string }) => err,
  );
  assert.ok(refused !== null, 'an unknown image name fails');
  assert.equal(refused.code, 1);
  assert.match(refused.stderr, /unknown stand-in image oracle; the names are postgres, mariadb, redis, node, python, go, debian/);
});

test('--mirror replaces the host apt sources', () => {
  assert.deepEqual(standIns.mirrors(['http://mirror.internal/debian']), ['http://mirror.internal/debian']);
  assert.ok(standIns.mirrors().length > 0);
});

describe('language and base images run their tools', { concurrency: true }, () => {
  const runIn = async (image: string, argv: string[]) => docker(['run', '--rm', '--network', 'none', '--', image, ...argv], 180_000);

  test('node:20: node, npm and corepack of the Node.js that runs Slipway; CMD node', async () => {
    assert.equal((await runIn('slipway-stand-in/node:20', ['node', '--version'])).trim(), process.version);
    assert.match(await runIn('slipway-stand-in/node:20', ['npm', '--version']), /^\d+\.\d+\.\d+/);
    assert.match(await runIn('slipway-stand-in/node:20', ['corepack', '--version']), /^\d+\.\d+\.\d+/);
    assert.deepEqual(JSON.parse(await docker(['image', 'inspect', '--format', '{{ json .Config.Cmd }}', '--', 'slipway-stand-in/node:20'])), ['node']);
    assert.equal((await runIn('slipway-stand-in/node:20', ['id', '-u', 'node'])).trim(), '1000');
  });

  test('python:3.11: python and python3, pip that may install system-wide, venv', async () => {
    assert.match(await runIn('slipway-stand-in/python:3.11', ['python', '--version']), /^Python 3\.11\./);
    assert.match(await runIn('slipway-stand-in/python:3.11', ['python3', '--version']), /^Python 3\.11\./);
    assert.match(await runIn('slipway-stand-in/python:3.11', ['pip', '--version']), /python 3\.11/);
    const venv = await runIn('slipway-stand-in/python:3.11', ['sh', '-c', 'python3 -m venv /tmp/v && /tmp/v/bin/python -c "import sys; print(sys.prefix)" && ! ls /usr/lib/python3.11/EXTERNALLY-MANAGED 2>/dev/null']);
    assert.equal(venv.trim(), '/tmp/v');
  });

  test('go:1.19: go on PATH with GOPATH /go, and it builds a program offline', async () => {
    assert.match(await runIn('slipway-stand-in/go:1.19', ['go', 'version']), /go version go1\.19/);
    assert.equal((await runIn('slipway-stand-in/go:1.19', ['go', 'env', 'GOPATH'])).trim(), '/go');
    const program = 'package main\nimport "fmt"\nfunc main() { fmt.Println("built offline") }\n';
    const out = await runIn('slipway-stand-in/go:1.19', ['sh', '-c', 'cd "$(mktemp -d)" && printf "%s" "$1" > main.go && go mod init example.test/hello >/dev/null 2>&1 && CGO_ENABLED=0 go build -o hello . && ./hello', 'sh', program]);
    assert.equal(out.trim(), 'built offline');
  });

  test('debian:bookworm: Debian 12 with bash as its command', async () => {
    assert.match(await runIn('slipway-stand-in/debian:bookworm', ['cat', '/etc/debian_version']), /^12\./);
    assert.deepEqual(JSON.parse(await docker(['image', 'inspect', '--format', '{{ json .Config.Cmd }}', '--', 'slipway-stand-in/debian:bookworm'])), ['bash']);
    assert.equal((await runIn('slipway-stand-in/debian:bookworm', ['bash', '-c', 'echo "$BASH_VERSION" | cut -d. -f1'])).trim(), '5');
  });
});
