// Issue 33 item 12: the README's "Deploy a folder with the CLI" steps, followed as written, leave the
// checkout as it was (the link file lands in the copied folder), and git ignores a stray one anyway.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { PROJECT_ROOT } from '../helpers/server.js';

const run = promisify(execFile);

/** The commands of the README section `heading`'s first sh block, comments removed. */
async function readmeCommands(heading: string): Promise<string[]> {
  const readme = await readFile(path.join(PROJECT_ROOT, 'README.md'), 'utf8');
  const section = readme.slice(readme.indexOf(`## ${heading}`));
  const block = /```sh\n([\s\S]*?)```/.exec(section)?.[1] ?? '';
  return block.split('\n').map((line) => line.replace(/\s+#.*$/, '').trim()).filter((line) => line !== '');
}

test("the README deploys a copy of examples/hello made outside the checkout, and says where the link file goes", async () => {
  const commands = await readmeCommands('Deploy a folder with the CLI');
  const copy = commands.findIndex((c) => c === 'cp -R examples/hello /tmp/hello');
  const deploy = commands.findIndex((c) => c === 'node bin/slipway.js deploy /tmp/hello');
  assert.ok(copy >= 0 && deploy > copy, commands.join('\n'));
  assert.ok(!commands.some((c) => /deploy examples\//.test(c)), 'no step deploys a folder of the checkout');
  const readme = await readFile(path.join(PROJECT_ROOT, 'README.md'), 'utf8');
  assert.match(readme, /`deploy` remembers the app in `\/tmp\/hello\/slipway\.json`/);
});

test('a link file written into the checkout by an older habit is ignored by git', async () => {
  const { stdout } = await run('git', ['check-ignore', '--no-index', '--', 'examples/hello/slipway.json'], { cwd: PROJECT_ROOT });
  assert.equal(stdout, 'examples/hello/slipway.json\n');
});
