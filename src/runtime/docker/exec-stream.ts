// A command run inside a container with its stdout as a stream (and optionally a stream as its stdin): dumps and restores of managed databases, with backpressure end to end.
import { Transform, type Readable, type TransformCallback, type Duplex } from 'node:stream';
import type Dockerode from 'dockerode';
import type { ExecStream } from '../engine.js';

/** Stderr kept of a streamed command. */
const STDERR_MAX = 16_384;

/**
 * Splits the engine's multiplexed exec stream (8-byte frame headers: stream id, 3 zero bytes, a
 * big-endian length) into stdout, pushed on with backpressure, and stderr, kept as a short tail.
 */
class ExecDemuxer extends Transform {
  #pending: Buffer = Buffer.alloc(0);
  stderr = '';

  constructor(readonly onStderr?: (text: string) => void) {
    super();
  }

  override _transform(data: Buffer, _encoding: BufferEncoding, done: TransformCallback): void {
    let buffer = this.#pending.length === 0 ? data : Buffer.concat([this.#pending, data]);
    while (buffer.length >= 8) {
      const length = buffer.readUInt32BE(4);
      if (buffer.length < 8 + length) break;
      const payload = buffer.subarray(8, 8 + length);
      if (buffer[0] === 2) {
        const text = payload.toString('utf8');
        this.stderr = (this.stderr + text).slice(-STDERR_MAX);
        this.onStderr?.(text);
      } else if (payload.length > 0) this.push(payload);
      buffer = buffer.subarray(8 + length);
    }
    this.#pending = Buffer.from(buffer);
    done();
  }
}

/**
 * Runs `argv` (never through a shell) in container `id`. Its stdout is `stdout` (read it, or the
 * command stalls: backpressure reaches it); `stdin`, when given, is piped in and closed at its end.
 * `done` resolves with the exit code and the stderr tail once the command ended (`onStderr` hears
 * stderr as it comes). Aborting `signal` cuts the connection (the command gets EPIPE / SIGPIPE on
 * its next write).
 */
export async function execStream(
  docker: Dockerode,
  id: string,
  argv: readonly string[],
  options: { env?: Record<string, string>; stdin?: Readable; signal: AbortSignal; onStderr?: (text: string) => void },
): Promise<ExecStream> {
  const env = Object.entries(options.env ?? {}).map(([key, value]) => `${key}=${value}`);
  const exec = await docker.getContainer(id).exec({
    Cmd: [...argv],
    Env: env,
    AttachStdout: true,
    AttachStderr: true,
    AttachStdin: options.stdin !== undefined,
    Tty: false,
  });
  const socket = (await exec.start({ hijack: true, stdin: options.stdin !== undefined })) as Duplex;
  const demux = new ExecDemuxer(options.onStderr);
  const onAbort = (): void => {
    socket.destroy();
    demux.destroy(options.signal.reason instanceof Error ? options.signal.reason : new Error('aborted'));
  };
  options.signal.addEventListener('abort', onAbort, { once: true });
  socket.on('error', (err) => demux.destroy(err));
  socket.pipe(demux);
  if (options.stdin !== undefined) {
    options.stdin.on('error', (err) => {
      socket.destroy();
      demux.destroy(err);
    });
    // The socket's end is half-closed: the command sees its stdin end, its stdout keeps coming.
    options.stdin.pipe(socket, { end: true });
  }
  const done = new Promise<{ exitCode: number; output: string }>((resolve, reject) => {
    demux.once('end', () => {
      options.signal.removeEventListener('abort', onAbort);
      exec.inspect().then((info) => resolve({ exitCode: info.ExitCode ?? -1, output: demux.stderr }), reject);
    });
    demux.once('error', (err) => {
      options.signal.removeEventListener('abort', onAbort);
      reject(err);
    });
    demux.once('close', () => {
      if (!demux.readableEnded) reject(new Error('the command was cut off'));
    });
  });
  // A caller that only awaits `done` must not see an unhandled rejection from an early failure.
  done.catch(() => undefined);
  return { stdout: demux, done };
}
