// Contract of the BuildLogs port: on disk, in the database on SQLite, and (with SLIPWAY_TEST_DATABASE_URL) written on one PostgreSQL instance and read on another.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { BuildLogStore, type BuildLogs } from '../../src/deploy/build-logs.js';
import type { Coordination } from '../../src/deploy/coordination.js';
import { memoryCoordination } from '../../src/deploy/memory-coordination.js';
import { databaseBuildLogs } from '../../src/db/build-log-chunks.js';
import { openDatabase, type Db } from '../../src/db/database.js';
import { pgCoordination } from '../../src/db/pg-coordination.js';
import { testDatabase } from '../helpers/server.js';

const quiet = (): void => undefined;
const CAP = 4096;

const dirs: string[] = [];
after(() => {
  for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true });
});
const tempDir = (): string => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'slipway-log-contract-'));
  dirs.push(dir);
  return dir;
};

async function eventually(check: () => boolean, what: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

/** Reads a whole stream as text, keeping what came so far in `seen`. */
async function collect(chunks: AsyncIterable<Buffer>, seen: { text: string } = { text: '' }): Promise<string> {
  for await (const chunk of chunks) seen.text += chunk.toString('utf8');
  return seen.text;
}

interface Pair {
  /** The instance that builds (writes), and another that reads; the same object for one instance. */
  readonly writer: BuildLogs;
  readonly reader: BuildLogs;
  /** Whether a log whose writer died (never closed) can exist apart from its writer (several instances). */
  readonly separate: boolean;
  close(): Promise<void>;
}

let ids = 0;
const nextId = (what: string): string => `${what}-${process.pid}-${(ids += 1)}`;

function contract(name: string, open: () => Promise<Pair>): void {
  describe(`BuildLogs contract: ${name}`, () => {
    it('a closed log reads back whole on the other instance', async () => {
      const pair = await open();
      try {
        const [dep, build] = [nextId('dep'), nextId('build')];
        const text = Array.from({ length: 50 }, (_, i) => `line ${i} [redacted]\n`).join('');
        for (const line of text.split(/(?<=\n)/)) pair.writer.append(dep, build, line);
        await pair.writer.close(build);
        assert.equal(await collect(pair.reader.read(dep, build)), text);
        assert.equal(await collect(pair.reader.read(dep, nextId('none'))), '', 'an unknown build has an empty log');
      } finally {
        await pair.close();
      }
    });

    it('a follower on the other instance gets lines while the build runs, and ends once it has ended and its log is closed', async () => {
      const pair = await open();
      try {
        const [dep, build] = [nextId('dep'), nextId('build')];
        let finished = false;
        const seen = { text: '' };
        let ended = false;
        const followed = collect(pair.reader.read(dep, build, { isFinished: async () => finished, pollMs: 5000 }), seen).finally(() => (ended = true));
        pair.writer.append(dep, build, 'first line\n');
        await eventually(() => seen.text.includes('first line\n'), 'the first line to reach the follower');
        pair.writer.append(dep, build, 'second line\n');
        await eventually(() => seen.text.includes('second line\n'), 'the second line to reach the follower');
        assert.equal(ended, false, 'the follower waits while the build runs');
        pair.writer.append(dep, build, 'last line\n');
        finished = true;
        await pair.writer.close(build);
        assert.equal(await followed, 'first line\nsecond line\nlast line\n');
      } finally {
        await pair.close();
      }
    });

    it("a read of a build that has ended waits for its log's close, so it gets the last lines (the held tail)", async () => {
      const pair = await open();
      try {
        const [dep, build] = [nextId('dep'), nextId('build')];
        // Past the head: what follows is held in memory until the close.
        for (let i = 0; i < 400; i++) pair.writer.append(dep, build, `output line ${i}\n`);
        pair.writer.append(dep, build, '==> the last line\n');
        let closed = false;
        const read = collect(pair.reader.read(dep, build, { isFinished: async () => true, pollMs: 50 })).then((text) => ({ text, closed }));
        await sleep(300);
        closed = true;
        await pair.writer.close(build);
        const { text, closed: closedFirst } = await read;
        assert.equal(closedFirst, true, 'the read ended only after the close');
        assert.match(text, /==> the last line\n$/);
      } finally {
        await pair.close();
      }
    });

    it('keeps the cap: the head, a marker counting what was cut, and the tail', async () => {
      const pair = await open();
      try {
        const [dep, build] = [nextId('dep'), nextId('build')];
        for (let i = 0; i < 2000; i++) pair.writer.append(dep, build, `output line ${i}\n`);
        await pair.writer.close(build);
        const text = await collect(pair.reader.read(dep, build));
        assert.ok(Buffer.byteLength(text) <= CAP, `${Buffer.byteLength(text)} bytes for a cap of ${CAP}`);
        assert.match(text, /^output line 0\n/);
        assert.match(text, /^… \d+ bytes of build output omitted …$/m);
        assert.match(text, /output line 1999\n$/);
      } finally {
        await pair.close();
      }
    });

    it('a follower whose client goes stops; removing the deployment removes its logs', async () => {
      const pair = await open();
      try {
        const [dep, build] = [nextId('dep'), nextId('build')];
        pair.writer.append(dep, build, 'kept until removed\n');
        const controller = new AbortController();
        const seen = { text: '' };
        const followed = collect(pair.reader.read(dep, build, { isFinished: async () => false, signal: controller.signal, pollMs: 5000 }), seen);
        await eventually(() => seen.text.includes('kept'), 'the line to reach the follower');
        controller.abort();
        assert.equal(await followed, 'kept until removed\n');
        await pair.writer.close(build);
        await pair.writer.removeDeployment(dep);
        assert.equal(await collect(pair.reader.read(dep, build)), '');
      } finally {
        await pair.close();
      }
    });

    it('a follower of a build that ended without its log being closed (its instance died) ends', async (t) => {
      const pair = await open();
      try {
        if (!pair.separate) return t.diagnostic('one instance: a log is closed by the process that ended its build');
        const [dep, build] = [nextId('dep'), nextId('build')];
        pair.writer.append(dep, build, 'the last words\n');
        const seen = { text: '' };
        const followed = collect(pair.reader.read(dep, build, { isFinished: async () => true, pollMs: 100 }), seen);
        assert.equal(await followed, 'the last words\n');
      } finally {
        await pair.close();
      }
    });
  });
}

contract('on disk (one instance)', async () => {
  const logs = new BuildLogStore(tempDir(), CAP);
  return { writer: logs, reader: logs, separate: false, close: async () => undefined };
});

const dbLogs = (db: Db, coordination: Coordination, self: string): BuildLogs =>
  databaseBuildLogs(db, { maxBytes: CAP, coordination, self, log: quiet, flushMs: 20, finalGraceMs: 1000 });

contract('in the database on SQLite (one instance)', async () => {
  const db = await openDatabase({ file: path.join(tempDir(), 'slipway.db') });
  const coordination = memoryCoordination();
  const logs = dbLogs(db, coordination, 'one');
  return { writer: logs, reader: logs, separate: false, close: async () => { await coordination.close(); await db.destroy(); } };
});

describe('BuildLogs on PostgreSQL', async () => {
  const database = await testDatabase();
  after(async () => database?.drop());
  // The SQLite pass has no PostgreSQL: the PostgreSQL pass of scripts/test.mjs runs this part.
  if (database === undefined) return;
  contract('in the database on PostgreSQL (written on one instance, read on another)', async () => {
    const file = path.join(tempDir(), 'unused.db');
    const [dbA, dbB] = [await openDatabase({ file, url: database.url }), await openDatabase({ file, url: database.url })];
    const [a, b] = [await pgCoordination({ url: database.url, log: quiet }), await pgCoordination({ url: database.url, log: quiet })];
    return {
      writer: dbLogs(dbA, a, 'a'),
      // The reader polls rarely: what it gets in time came through the other instance's notification.
      reader: dbLogs(dbB, b, 'b'),
      separate: true,
      close: async () => {
        await Promise.all([a.close(), b.close()]);
        await Promise.all([dbA.destroy(), dbB.destroy()]);
      },
    };
  });
});
