// Test factory for the swarm test cluster (scripts/swarm-cluster.mjs): its layout, the docker CLI on a node, a busybox app image in its registry, the test busybox image copied to it.
import { execFile, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import fsp from 'node:fs/promises';
import { tarGzOf, tempDir, testEngine } from './apps.js';
import { BUSYBOX_IMAGE, ensureBusyboxImage, writeBusyboxApp } from './busybox-image.js';
import { PROJECT_ROOT } from './server.js';

export interface ClusterNode {
  readonly name: string;
  readonly netns: string;
  readonly address: string;
  readonly socket: string;
}

export interface ClusterLayout {
  readonly id: number;
  readonly bridge: string;
  readonly nodes: readonly ClusterNode[];
  readonly registry: string;
  /** The cluster's own directory (removed by `down`, and any process whose arguments name it killed). */
  readonly dir: string;
  /** `<manager>:5001`, trusted by every node: for a Slipway that runs its own registry there. */
  readonly ownRegistry: string;
  readonly forwardRule: readonly string[];
}

export interface ClusterScript {
  /** A new cluster owned by `ownerPid` (swept by a later run once that process has ended). */
  up(ownerPid?: number): Promise<ClusterLayout>;
  down(layout: ClusterLayout): Promise<void>;
}

export const clusterScript = (): Promise<ClusterScript> =>
  import(pathToFileURL(path.join(PROJECT_ROOT, 'scripts', 'swarm-cluster.mjs')).href) as Promise<ClusterScript>;

/** The docker CLI against one node's engine (argv, no shell). */
export function nodeDocker(node: ClusterNode, args: string[]): string {
  return execFileSync('docker', ['-H', `unix://${node.socket}`, ...args], { encoding: 'utf8', timeout: 120_000, stdio: ['ignore', 'pipe', 'pipe'] });
}

/** nodeDocker without blocking (several at once): resolves with whether the command exited 0. */
export function nodeDockerSucceeds(node: ClusterNode, args: string[]): Promise<boolean> {
  return new Promise((resolve) => {
    execFile('docker', ['-H', `unix://${node.socket}`, ...args], { encoding: 'utf8', timeout: 120_000 }, (err) => resolve(err === null));
  });
}

/**
 * A busybox httpd image serving its hostname at /who.txt, built on the manager on top of the test
 * busybox image (copied from this host's engine: no build of its own to wait for) and pushed to the
 * cluster's registry; resolves with its name.
 */
export async function pushWhoImage(layout: ClusterLayout, tag = '1'): Promise<string> {
  const manager = layout.nodes[0];
  if (manager === undefined) throw new Error('the cluster has no manager');
  await busyboxOnManager(layout);
  const context = fs.mkdtempSync(path.join(os.tmpdir(), 'slipway-swarm-image-'));
  try {
    fs.writeFileSync(
      path.join(context, 'Dockerfile'),
      [`FROM ${BUSYBOX_IMAGE}`, `CMD ["/bin/sh","-c","mkdir -p /www && hostname > /www/who.txt && exec httpd -f -p 8080 -h /www"]`, ''].join('\n'),
    );
    const image = `${layout.registry}/slipway-test/who:${tag}`;
    nodeDocker(manager, ['build', '-q', '-t', image, context]);
    nodeDocker(manager, ['push', '-q', image]);
    return image;
  } finally {
    fs.rmSync(context, { recursive: true, force: true });
  }
}

/** The test busybox image (what every test app builds FROM) on the manager, copied from this host's engine rather than built there. */
export async function busyboxOnManager(layout: ClusterLayout): Promise<void> {
  const manager = layout.nodes[0];
  if (manager === undefined) throw new Error('the cluster has no manager');
  await copyImageToNode(manager, await ensureBusyboxImage(testEngine()));
}

/** A busybox app archive that serves `body` at / and its container's hostname at /who.txt (which replica answered). */
export async function whoAppArchive(body: string): Promise<Buffer> {
  const dir = tempDir('swarm-app');
  try {
    await writeBusyboxApp(dir, { body });
    const dockerfile = path.join(dir, 'Dockerfile');
    const text = await fsp.readFile(dockerfile, 'utf8');
    await fsp.writeFile(dockerfile, text.replace('exec httpd', 'hostname > /www/who.txt; exec httpd'));
    return await tarGzOf(dir);
  } finally {
    await fsp.rm(dir, { recursive: true, force: true });
  }
}

/** Copies `image` from this host's engine into one node's engine (`docker save | docker load`, argv only); skipped when the node has it. */
export async function copyImageToNode(node: ClusterNode, image: string): Promise<void> {
  try {
    nodeDocker(node, ['image', 'inspect', '--format', '{{.Id}}', image]);
    return;
  } catch {
    // Not there yet.
  }
  const { spawn } = await import('node:child_process');
  await new Promise<void>((resolve, reject) => {
    const save = spawn('docker', ['save', image], { stdio: ['ignore', 'pipe', 'inherit'] });
    const load = spawn('docker', ['-H', `unix://${node.socket}`, 'load', '-q'], { stdio: ['pipe', 'ignore', 'inherit'] });
    save.stdout.pipe(load.stdin);
    save.on('error', reject);
    load.on('error', reject);
    load.on('close', (code) => (code === 0 ? resolve() : reject(new Error(`docker load of ${image} exited with ${code}`))));
  });
}
