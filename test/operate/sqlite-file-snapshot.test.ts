// The pinned SQLite file snapshot a self-backup reads: the database as of the pin whatever is committed meanwhile, and no pin when a checkpoint cannot copy every frame; the file sink writes every byte and syncs.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import SQLite from 'better-sqlite3';
import { fileSink } from '../../src/operate/file-sink.js';
import { pinFileSnapshot } from '../../src/operate/sqlite-file-snapshot.js';

let dir: string;
let file: string;
before(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'slipway-file-snapshot-'));
  file = path.join(dir, 'db.sqlite');
  const db = new SQLite(file);
  db.pragma('journal_mode = WAL');
  db.exec('create table t (id integer primary key, body blob not null)');
  const insert = db.prepare('insert into t (body) values (?)');
  db.transaction(() => {
    for (let i = 0; i < 2000; i++) insert.run(Buffer.alloc(300, i % 251));
  })();
  db.close();
});
after(() => fs.rmSync(dir, { recursive: true, force: true }));

const rowsIn = (bytes: Buffer): { count: number; check: string } => {
  // As a restore does: the bytes become a database file (they say WAL mode, which an in-memory database cannot be).
  const restored = path.join(dir, `restored-${Date.now()}.sqlite`);
  fs.writeFileSync(restored, bytes);
  const copy = new SQLite(restored);
  try {
    return { count: (copy.prepare('select count(*) as n from t').get() as { n: number }).n, check: String(copy.pragma('integrity_check', { simple: true })) };
  } finally {
    copy.close();
  }
};

test('the pinned file is the database as of the pin, while another connection commits (and checkpoints) meanwhile', () => {
  const live = new SQLite(file);
  const writer = new SQLite(file);
  try {
    const pin = pinFileSnapshot(live, file, () => (live.prepare('select count(*) as n from t').get() as { n: number }).n);
    assert.ok(pin, 'a quiet WAL database is pinned');
    assert.equal(pin.value, 2000);
    // Commits after the pin go to the WAL; a checkpoint may not copy them into the file while the pin holds.
    const insert = writer.prepare('insert into t (body) values (?)');
    writer.transaction(() => {
      for (let i = 0; i < 3000; i++) insert.run(Buffer.alloc(300, 7));
    })();
    writer.exec('delete from t where id <= 500');
    writer.pragma('wal_checkpoint(PASSIVE)');
    const bytes = Buffer.concat([...pin.snapshot.pieces()]);
    pin.snapshot.release();
    assert.equal(bytes.length, pin.snapshot.size);
    assert.deepEqual(rowsIn(bytes), { count: 2000, check: 'ok' });
    assert.equal(live.inTransaction, false, 'release ends the read transaction');
  } finally {
    writer.close();
    live.close();
  }
});

test('no pin while an older reader keeps WAL frames from the file (the backup copies through SQLite then)', () => {
  const live = new SQLite(file);
  const reader = new SQLite(file);
  const writer = new SQLite(file);
  try {
    reader.exec('begin');
    reader.prepare('select count(*) from t').get();
    writer.prepare('insert into t (body) values (?)').run(Buffer.alloc(10));
    assert.equal(pinFileSnapshot(live, file, () => 1), undefined);
    assert.equal(live.inTransaction, false);
  } finally {
    reader.close();
    writer.close();
    live.close();
  }
});

test('the file sink writes every chunk in order and closes the file', async () => {
  const target = path.join(dir, 'sink.bin');
  const fd = fs.openSync(target, 'wx');
  const sink = fileSink(fd);
  const chunks = Array.from({ length: 3000 }, (_, i) => Buffer.alloc(1 + (i % 700), i % 256));
  for (const chunk of chunks) if (!sink.write(chunk)) await new Promise((resolve) => sink.once('drain', resolve));
  await new Promise<void>((resolve, reject) => sink.end((err?: Error | null) => (err ? reject(err) : resolve())));
  assert.deepEqual(fs.readFileSync(target), Buffer.concat(chunks));
  assert.throws(() => fs.fstatSync(fd), /EBADF/);
});
