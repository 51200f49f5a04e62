// Engine calls of long-lived services (databases): a command run inside a container, network attachments, image pulls.
import type { Readable } from 'node:stream';
import type Dockerode from 'dockerode';
import type { ExecResult } from '../engine.js';
import { LogDemuxer } from './log-demuxer.js';
import { followProgress, ignoreStatus, withTimeout } from './engine-calls.js';

/** Time limit of one short engine call. */
const CALL_TIMEOUT_MS = 30_000;
/** Output kept of a command run inside a container. */
const EXEC_OUTPUT_MAX = 16_384;

/** Runs `argv` inside container `id` (never through a shell) and waits for its exit code within `timeoutMs`. */
export async function execIn(
  docker: Dockerode,
  id: string,
  argv: readonly string[],
  options: { env?: Record<string, string>; timeoutMs: number },
): Promise<ExecResult> {
  const env = Object.entries(options.env ?? {}).map(([key, value]) => `${key}=${value}`);
  return withTimeout(`exec in container ${id}`, options.timeoutMs, async (signal) => {
    const exec = await docker.getContainer(id).exec({ Cmd: [...argv], Env: env, AttachStdout: true, AttachStderr: true, Tty: false, abortSignal: signal });
    const stream = (await exec.start({ hijack: true, stdin: false, abortSignal: signal })) as Readable;
    const demux = new LogDemuxer();
    let output = '';
    const onAbort = (): void => {
      stream.destroy();
    };
    signal.addEventListener('abort', onAbort, { once: true });
    try {
      for await (const chunk of stream) {
        output = (output + demux.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(String(chunk)))).slice(-EXEC_OUTPUT_MAX);
      }
    } finally {
      signal.removeEventListener('abort', onAbort);
    }
    output = (output + demux.end()).slice(-EXEC_OUTPUT_MAX);
    const info = await exec.inspect({ abortSignal: signal });
    return { exitCode: info.ExitCode ?? -1, output };
  });
}

/** Attaches container `containerId` to `network` with `aliases`; one already attached is left as it is. */
export async function connectTo(docker: Dockerode, network: string, containerId: string, aliases: readonly string[] = []): Promise<void> {
  try {
    await withTimeout(`connect ${containerId} to ${network}`, CALL_TIMEOUT_MS, (s) =>
      // The typings omit abortSignal, which dockerode passes to the request.
      docker.getNetwork(network).connect({ Container: containerId, EndpointConfig: { Aliases: [...aliases] }, abortSignal: s } as Dockerode.NetworkConnectOptions),
    );
  } catch (err) {
    // 403 "endpoint ... already exists in network": attached already.
    if (!/already exists/i.test(err instanceof Error ? err.message : String(err))) throw err;
  }
}

/** Detaches container `containerId` from `network`; a network or container that is gone, or not attached, is no error. */
export async function disconnectFrom(docker: Dockerode, network: string, containerId: string): Promise<void> {
  try {
    await ignoreStatus([404], () =>
      withTimeout(`disconnect ${containerId} from ${network}`, CALL_TIMEOUT_MS, (s) =>
        docker.getNetwork(network).disconnect({ Container: containerId, Force: true, abortSignal: s } as object) as Promise<unknown>,
      ),
    );
  } catch (err) {
    if (!/is not connected/i.test(err instanceof Error ? err.message : String(err))) throw err;
  }
}

/** Pulls `ref`, following its progress to the end. */
export async function pull(docker: Dockerode, ref: string, signal: AbortSignal): Promise<void> {
  const stream = (await docker.pull(ref, { abortSignal: signal })) as Readable;
  await followProgress(docker, stream, `pull ${ref}`);
}
