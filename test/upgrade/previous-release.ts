// The previous release of Slipway, built once into a temp directory from this repository's history, for the upgrade test.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import * as tar from 'tar';
import { PROJECT_ROOT } from '../helpers/server.js';

const run = promisify(execFile);

/**
 * The release before Part four's work (the last commit on main before it). A later release moves
 * this forward and adds its own step to the fixture (fixture.ts).
 */
export const PREVIOUS_RELEASE = 'c9c6f37';

/**
 * Extracts `commit` of the repository the tests run in (git archive: nothing registered in the
 * repository) into a directory of its own, links this tree's node_modules and compiles its sources
 * with this tree's tsc. Built once per commit and reused (the directory is keyed by the commit).
 * Resolves with the release's root (its bin/slipway.js runs it).
 */
export async function buildRelease(commit: string = PREVIOUS_RELEASE): Promise<string> {
  let full: string;
  try {
    full = (await run('git', ['-C', PROJECT_ROOT, 'rev-parse', '--verify', '--quiet', `${commit}^{commit}`])).stdout.trim();
  } catch {
    throw new Error(
      `the upgrade test needs commit ${commit} (the previous release, in main's history), and ${PROJECT_ROOT} does not hold it: ` +
        'run the tests from a full clone (not a shallow one: git fetch --unshallow)',
    );
  }
  const root = path.join(os.tmpdir(), `slipway-release-${full.slice(0, 12)}`);
  const done = path.join(root, '.built');
  if (fs.existsSync(done)) {
    // The cached build runs on this tree's node_modules (a cache made by another checkout, since
    // removed, would point at nothing): the link is replaced in one rename when it differs.
    const modules = path.join(PROJECT_ROOT, 'node_modules');
    const link = path.join(root, 'node_modules');
    if ((fs.existsSync(link) ? fs.readlinkSync(link) : '') !== modules) {
      const fresh = `${link}.${process.pid}`;
      fs.rmSync(fresh, { force: true });
      fs.symlinkSync(modules, fresh, 'dir');
      fs.renameSync(fresh, link);
    }
    return root;
  }
  const staging = `${root}.${process.pid}`;
  fs.rmSync(staging, { recursive: true, force: true });
  fs.mkdirSync(staging, { recursive: true });
  const archive = path.join(staging, '.source.tar');
  await run('git', ['-C', PROJECT_ROOT, 'archive', '--format=tar', '-o', archive, full, '--', 'bin', 'src', 'public', 'package.json', 'tsconfig.json'], { maxBuffer: 64 * 1024 * 1024 });
  await tar.x({ file: archive, cwd: staging });
  fs.rmSync(archive);
  fs.symlinkSync(path.join(PROJECT_ROOT, 'node_modules'), path.join(staging, 'node_modules'), 'dir');
  // Only the sources: the release's tests are not needed to run it.
  fs.writeFileSync(path.join(staging, 'tsconfig.release.json'), JSON.stringify({ extends: './tsconfig.json', compilerOptions: { incremental: false, sourceMap: false }, include: ['src/**/*.ts'] }));
  try {
    await run(process.execPath, [path.join(PROJECT_ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', path.join(staging, 'tsconfig.release.json')], { cwd: staging, timeout: 240_000, maxBuffer: 64 * 1024 * 1024 });
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string };
    throw new Error(`compiling release ${commit} failed:\n${(e.stdout ?? '') + (e.stderr ?? '')}`.slice(0, 4000));
  }
  fs.writeFileSync(path.join(staging, '.built'), `${full}\n`);
  // Another test process may have finished first: its build is as good as ours.
  try {
    fs.renameSync(staging, root);
  } catch {
    fs.rmSync(staging, { recursive: true, force: true });
  }
  return root;
}
