// A swarm release's output read through the manager: a service's logs, or one task's, as text (the engine's frames demultiplexed).
import type { Readable } from 'node:stream';
import type Dockerode from 'dockerode';
import { LogDemuxer } from '../docker/log-demuxer.js';

interface LogOptions {
  readonly tail?: number | undefined;
  readonly follow: boolean;
  readonly signal: AbortSignal;
  readonly timestamps?: boolean;
}

/** How long the manager may take to start answering (it gathers the output from the task's node). */
const OPEN_TIMEOUT_MS = 30_000;

async function* demuxed(open: (query: Record<string, unknown>) => Promise<unknown>, options: LogOptions): AsyncIterable<string> {
  const { signal } = options;
  if (signal.aborted) return;
  const query = {
    stdout: true,
    stderr: true,
    timestamps: options.timestamps === true,
    follow: options.follow,
    ...(options.tail === undefined ? {} : { tail: Math.max(0, Math.floor(options.tail)) }),
  };
  const demux = new LogDemuxer();
  const opening = AbortSignal.any([signal, AbortSignal.timeout(OPEN_TIMEOUT_MS)]);
  let answer: unknown;
  try {
    answer = await open({ ...query, abortSignal: options.follow ? signal : opening });
  } catch (err) {
    if (signal.aborted) return;
    throw err;
  }
  if (Buffer.isBuffer(answer) || typeof answer === 'string') {
    const text = demux.push(Buffer.isBuffer(answer) ? answer : Buffer.from(answer)) + demux.end();
    if (text !== '') yield text;
    return;
  }
  const stream = answer as Readable;
  const destroy = (): void => {
    stream.destroy();
  };
  signal.addEventListener('abort', destroy, { once: true });
  try {
    for await (const chunk of stream) {
      const text = demux.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(String(chunk)));
      if (text !== '') yield text;
    }
    const rest = demux.end();
    if (rest !== '') yield rest;
  } catch (err) {
    if (signal.aborted) return;
    throw err;
  } finally {
    signal.removeEventListener('abort', destroy);
    stream.destroy();
  }
}

/** Every task's output of a service, as the manager merges it. */
export function serviceLogs(docker: Dockerode, serviceId: string, options: LogOptions): AsyncIterable<string> {
  return demuxed((query) => docker.getService(serviceId).logs(query as Dockerode.ContainerLogsOptions) as Promise<unknown>, options);
}

/** One task's output, wherever it runs. */
export function taskLogs(docker: Dockerode, taskId: string, options: LogOptions): AsyncIterable<string> {
  const task = docker.getTask(taskId) as unknown as { logs(query: Record<string, unknown>): Promise<unknown> };
  return demuxed((query) => task.logs(query), options);
}
