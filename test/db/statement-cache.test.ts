// Unit tests of the statement cache: the rows read through it are the rows better-sqlite3 gives.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import SQLite from 'better-sqlite3';
import { withStatementCache } from '../../src/db/statement-cache.js';

function fixture(): SQLite.Database {
  const db = new SQLite(':memory:');
  db.exec(`create table a (id integer primary key, name text, size real, blob blob, note text);
           create table b (id integer primary key, a_id integer, name text);
           insert into a values (1, 'one', 1.5, x'00ff', null), (2, 'two', null, null, 'n');
           insert into b values (10, 1, 'b-one');`);
  return db;
}

test('rows equal better-sqlite3 objects, duplicate column names included (the last wins)', () => {
  const db = fixture();
  const cached = withStatementCache(db);
  for (const sql of ['select * from a order by id', 'select a.id, b.id, a.name, b.name as name from a join b on b.a_id = a.id', 'select count(*) as n from a']) {
    assert.deepEqual(cached.prepare(sql).all([]), db.prepare(sql).all(), sql);
    assert.deepEqual(cached.prepare(sql).all([]), db.prepare(sql).all(), `${sql} (cached)`);
  }
  assert.deepEqual(cached.prepare('select name from a where id = ?').all([2]), [{ name: 'two' }]);
});

test('a statement is reused, writes still report their changes, and a schema change empties the cache', () => {
  const db = fixture();
  const cached = withStatementCache(db);
  assert.equal(cached.prepare('select * from a'), cached.prepare('select * from a'));
  const insert = cached.prepare('insert into a (id, name) values (?, ?)');
  assert.equal(insert.reader, false);
  assert.equal(insert.run([3, 'three']).changes, 1);
  assert.equal(cached.prepare('insert into a (id, name) values (?, ?)').run([4, 'four']).changes, 1);
  const before = cached.prepare('select * from a where id = 3').all([]);
  assert.deepEqual(Object.keys(before[0] as object), ['id', 'name', 'size', 'blob', 'note']);
  cached.prepare('alter table a add column extra text').run([]);
  const after = cached.prepare('select * from a where id = 3').all([]);
  assert.deepEqual(Object.keys(after[0] as object), ['id', 'name', 'size', 'blob', 'note', 'extra']);
});

test('a statement still being iterated is not handed out again', () => {
  const cached = withStatementCache(fixture());
  const sql = 'select id from a order by id';
  const iterator = cached.prepare(sql).iterate([]);
  assert.deepEqual(iterator.next().value, { id: 1 });
  // While the first iteration is open, the same SQL still runs (on a fresh statement).
  assert.deepEqual(cached.prepare(sql).all([]), [{ id: 1 }, { id: 2 }]);
  assert.deepEqual(iterator.next().value, { id: 2 });
  assert.equal(iterator.next().done, true);
});
