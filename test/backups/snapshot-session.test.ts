// Unit tests of the snapshot session a PostgreSQL dump shares (a fake engine's exec standing in for psql): the snapshot's name read from stderr as it comes, the inventory read at the end, and a session that names none falling back.
import assert from 'node:assert/strict';
import { PassThrough, type Readable } from 'node:stream';
import { describe, test } from 'node:test';
import { openSnapshotSession } from '../../src/backups/snapshot-session.js';
import { parseTableLines, type SnapshotDump } from '../../src/databases/engine-adapter.js';
import { postgresAdapter } from '../../src/databases/postgres-adapter.js';
import type { ContainerEngine, ExecResult } from '../../src/runtime/engine.js';

const credentials = { username: 'app', password: 'secret', database: 'shop' };
const spec: SnapshotDump = postgresAdapter.snapshotDump!;
const parse = (output: string) => ({ tables: parseTableLines(output) });

/**
 * An engine whose one exec plays a client: it answers what it reads on stdin through `play`,
 * which writes stderr pieces and stdout, and ends with an exit code.
 */
function fakeEngine(play: (input: string, io: { stderr: (text: string) => void; stdout: PassThrough; exit: (code: number) => void }) => void): { engine: ContainerEngine; input: () => string } {
  let seen = '';
  const engine = {
    async execStream(_id: string, _argv: readonly string[], options: { stdin?: Readable; onStderr?: (text: string) => void }) {
      const stdout = new PassThrough();
      let resolve: (r: ExecResult) => void = () => undefined;
      const done = new Promise<ExecResult>((r) => (resolve = r));
      let exited = false;
      const exit = (code: number): void => {
        if (exited) return;
        exited = true;
        stdout.end();
        resolve({ exitCode: code, output: 'psql: the tail' });
      };
      options.stdin?.on('data', (chunk: Buffer) => {
        seen += chunk.toString();
        play(seen, { stderr: (text) => options.onStderr?.(text), stdout, exit });
      });
      options.stdin?.on('close', () => exit(0));
      return { stdout, done };
    },
  } as unknown as ContainerEngine;
  return { engine, input: () => seen };
}

describe('snapshot session', () => {
  test('the name is read from stderr split across pieces; the inventory is read once the transaction ends', async () => {
    const { engine, input } = fakeEngine((seen, io) => {
      if (seen === spec.open) {
        io.stderr('slipway-snap');
        io.stderr('shot 00000003-0000001B-1\n');
      }
      if (seen.endsWith(spec.inventory)) io.stdout.write('public.items\t500\npublic.orders\t3\n');
      if (seen.endsWith(spec.close)) io.exit(0);
    });
    const session = await openSnapshotSession(engine, 'c1', spec, credentials, parse, AbortSignal.timeout(5000));
    assert.equal(session?.snapshot, '00000003-0000001B-1');
    assert.deepEqual(spec.dump(credentials, session.snapshot).argv.filter((a) => a.startsWith('--snapshot')), ['--snapshot=00000003-0000001B-1']);
    assert.deepEqual(await session.finish(), { tables: { 'public.items': 500, 'public.orders': 3 } });
    assert.ok(input().startsWith(spec.open) && input().endsWith(spec.close), 'the transaction opened, counted, then ended');
  });

  test('a client that ends without naming a snapshot (psql before 13): no session, the caller counts before and after', async () => {
    const { engine } = fakeEngine((_seen, io) => {
      io.stderr('invalid command \\warn\n');
      io.exit(3);
    });
    assert.equal(await openSnapshotSession(engine, 'c1', spec, credentials, parse, AbortSignal.timeout(5000)), undefined);
  });

  test('a failed inventory fails the dump step with the client\'s last line', async () => {
    const { engine } = fakeEngine((seen, io) => {
      if (seen === spec.open) io.stderr('slipway-snapshot 00000004-00000002-1\n');
      if (seen.endsWith(spec.close)) io.exit(3);
    });
    const session = await openSnapshotSession(engine, 'c1', spec, credentials, parse, AbortSignal.timeout(5000));
    await assert.rejects(session!.finish(), (err: Error & { step?: string }) => err.step === 'dump' && /exit 3.*the tail/.test(err.message));
  });
});
