// A database on the engine: its image made present, its container run from its adapter, waited for until it accepts logins, measured.
import { setTimeout as sleep } from 'node:timers/promises';
import type { ContainerEngine } from '../runtime/engine.js';
import { lastOutput, lastLine } from '../runtime/release.js';
import type { ServiceDialer, ServiceHost } from '../runtime/service-host.js';
import type { DatabaseCredentials, EngineAdapter } from './engine-adapter.js';
import { KNOCK_TIMEOUT_MS, knock } from './greeting.js';

/**
 * What a database container keeps of root's powers: an official image's entrypoint starts as root,
 * owns its data directory and drops to its own user (gosu/su-exec). NET_RAW, MKNOD, SETFCAP,
 * SETPCAP, FSETID, SYS_CHROOT and AUDIT_WRITE stay dropped.
 */
export const DATABASE_CAPABILITIES: readonly string[] = ['CHOWN', 'DAC_OVERRIDE', 'FOWNER', 'SETUID', 'SETGID', 'KILL'];
/** A database server runs many processes or threads (MariaDB a few dozen threads at rest). */
export const DATABASE_PIDS_LIMIT = 1024;
/** Time a database has to accept logins after its container starts (first start: the engine initializes its data). */
export const DATABASE_START_TIMEOUT_MS = 180_000;

/** Pause between readiness probes (each is an exec of the engine's client): a restore into a new database waits on it. */
const READY_POLL_MS = 200;
/** Pause between knocks on the port (a connection from the control plane, refused at once until the final server listens). */
const KNOCK_POLL_MS = 50;

/** A database that did not start; the message is the user's to read (it never holds a credential). */
export class DatabaseStartError extends Error {
  override readonly name = 'DatabaseStartError';
}

export interface DatabaseRunContext {
  readonly engine: ContainerEngine;
  readonly services: ServiceHost;
  readonly instanceId: string;
  readonly subnetPool: string;
}

export interface DatabaseRun {
  readonly id: string;
  readonly name: string;
  readonly image: string;
  readonly memoryBytes: number;
  readonly nanoCpus: number;
}

/**
 * Makes `image` present: pulled when the engine does not have it. A pull that fails names the
 * image, the setting that chose it and the command that builds a local stand-in.
 */
export async function ensureDatabaseImage(engine: ContainerEngine, adapter: EngineAdapter, image: string, signal: AbortSignal): Promise<void> {
  if (await engine.imageExists(image)) return;
  try {
    if (engine.pullImage === undefined) throw new Error('this engine cannot pull images');
    await engine.pullImage(image, signal);
  } catch (err) {
    if (signal.aborted) throw err;
    const detail = (err instanceof Error ? err.message : String(err)).split('\n')[0]?.slice(0, 300) ?? '';
    throw new DatabaseStartError(
      `the image ${image} is not on the engine and could not be pulled (${detail}). Set ${adapter.imageSetting} to an image the engine has, ` +
        `or build local stand-ins without a registry with \`npm run stand-in-images\` and set ${adapter.imageSetting} to the matching slipway-stand-in/ image`,
    );
  }
}

/** Runs the database's container (any earlier one replaced; the volume keeps the data) and waits until it accepts logins. Resolves with the container's id. */
export async function startDatabaseContainer(
  ctx: DatabaseRunContext,
  adapter: EngineAdapter,
  db: DatabaseRun,
  credentials: DatabaseCredentials,
  signal: AbortSignal,
): Promise<string> {
  await ensureDatabaseImage(ctx.engine, adapter, db.image, signal);
  signal.throwIfAborted();
  const container = await ctx.services.run({
    instanceId: ctx.instanceId,
    serviceId: db.id,
    image: db.image,
    env: adapter.environment(credentials),
    command: adapter.command(credentials),
    port: adapter.port,
    dataDir: adapter.dataDir,
    aliases: [db.name],
    memoryBytes: db.memoryBytes,
    nanoCpus: db.nanoCpus,
    pidsLimit: DATABASE_PIDS_LIMIT,
    capabilities: DATABASE_CAPABILITIES,
    subnetPool: ctx.subnetPool,
  });
  const dial = adapter.greeting === undefined ? null : await ctx.services.dialer(ctx.instanceId, db.id, adapter.port, KNOCK_TIMEOUT_MS);
  await waitReady(ctx.engine, container.id, adapter, credentials, DATABASE_START_TIMEOUT_MS, signal, dial ?? undefined);
  return container.id;
}

/**
 * Polls until the database takes logins: its greeting on its port through `dial` when the adapter
 * has one (a knock every 50 ms costs a connection, not an exec), else the adapter's probe inside
 * the container. Throws DatabaseStartError when the container exits or time runs out.
 */
export async function waitReady(
  engine: ContainerEngine,
  containerId: string,
  adapter: EngineAdapter,
  credentials: DatabaseCredentials,
  timeoutMs: number,
  signal: AbortSignal,
  dial?: ServiceDialer,
): Promise<void> {
  const exec = engine.execInContainer?.bind(engine);
  if (exec === undefined) throw new DatabaseStartError('this engine cannot run a command inside a container');
  const deadline = Date.now() + timeoutMs;
  const probe = adapter.probe(credentials);
  const knocking = dial !== undefined && adapter.greeting !== undefined;
  for (;;) {
    signal.throwIfAborted();
    const info = await engine.inspectContainer(containerId);
    if (info === null) throw new DatabaseStartError('the database container disappeared while starting');
    if (!info.running && info.state !== 'created') {
      const last = lastLine(await lastOutput(engine, containerId));
      throw new DatabaseStartError(`the database exited with code ${info.exitCode ?? 'unknown'} while starting${last === '' ? '' : `; its last line: ${last}`}`);
    }
    if (info.running) {
      if (knocking) {
        if (await knock(dial, adapter.greeting, credentials)) return;
      } else {
        const result = await exec(containerId, probe.argv, { env: probe.env, timeoutMs: 10_000 }).catch(() => undefined);
        if (result !== undefined && adapter.ready(result)) return;
      }
    }
    if (Date.now() >= deadline) throw new DatabaseStartError(`the database did not accept logins within ${Math.round(timeoutMs / 1000)} s`);
    await sleep(knocking ? KNOCK_POLL_MS : READY_POLL_MS, undefined, { signal });
  }
}

/** Bytes under the data directory (`du` inside the container); null when it cannot be measured now. */
export async function measureSize(engine: ContainerEngine, containerId: string, adapter: EngineAdapter): Promise<number | null> {
  const result = await engine.execInContainer?.(containerId, ['du', '-sk', adapter.dataDir], { timeoutMs: 5000 }).catch(() => undefined);
  const kib = result?.exitCode === 0 ? /^(\d+)/.exec(result.output.trim()) : null;
  return kib?.[1] === undefined ? null : Number(kib[1]) * 1024;
}
