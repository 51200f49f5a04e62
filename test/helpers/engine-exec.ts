// Test helper: run a command inside a container through the engine's exec API and read its output.
import type Dockerode from 'dockerode';

/**
 * Runs `cmd` inside the running container `containerId` (with a TTY, so stdout and stderr come as
 * one plain stream); resolves with its output once the command ends, within `timeoutMs`.
 */
export async function execIn(docker: Dockerode, containerId: string, cmd: string[], timeoutMs = 20_000): Promise<string> {
  const exec = await docker.getContainer(containerId).exec({ Cmd: cmd, AttachStdout: true, AttachStderr: true, Tty: true });
  const stream = await exec.start({ hijack: true, stdin: false, Tty: true });
  let text = '';
  const done = new Promise<void>((resolve, reject) => {
    stream.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')));
    stream.on('end', resolve);
    stream.on('close', resolve);
    stream.on('error', reject);
  });
  let timer: NodeJS.Timeout | undefined;
  const limit = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`exec ${cmd.join(' ')} did not finish within ${timeoutMs} ms`)), timeoutMs);
  });
  try {
    await Promise.race([done, limit]);
  } finally {
    clearTimeout(timer);
    stream.destroy();
  }
  return text.replace(/\r\n/g, '\n');
}
