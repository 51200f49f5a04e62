// One contract suite for every ChallengeStore (in memory; the database: SQLite, or PostgreSQL when configured), and the challenge answers over HTTP.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, describe, test } from 'node:test';
import { databaseChallengeStore } from '../../src/db/challenge-store.js';
import { HttpChallenges, memoryChallengeStore, type ChallengeStore } from '../../src/tls/http-challenges.js';
import { openTestDatabase } from '../helpers/server.js';

const token = (): string => crypto.randomBytes(24).toString('base64url');

function contract(name: string, make: () => Promise<{ a: ChallengeStore; b: ChallengeStore }>): void {
  describe(`ChallengeStore contract: ${name}`, () => {
    test('an answer set through one handle is read through another, until it is deleted', async () => {
      const { a, b } = await make();
      const t = token();
      assert.equal(await b.get(t), undefined);
      await a.set(t, `${t}.thumbprint`);
      assert.equal(await b.get(t), `${t}.thumbprint`);
      await a.set(t, `${t}.other`);
      assert.equal(await b.get(t), `${t}.other`, 'set again: replaced');
      await b.delete(t);
      assert.equal(await a.get(t), undefined);
      await b.delete(t);
    });

    test('tokens are apart', async () => {
      const { a, b } = await make();
      const [t1, t2] = [token(), token()];
      await a.set(t1, 'one');
      await b.set(t2, 'two');
      assert.deepEqual([await b.get(t1), await a.get(t2)], ['one', 'two']);
      await a.delete(t1);
      assert.equal(await b.get(t2), 'two');
      await b.delete(t2);
    });
  });
}

contract('in memory', async () => {
  const store = memoryChallengeStore();
  return { a: store, b: store };
});

const opened = openTestDatabase('challenge-store', []);
after(async () => (await opened).close());

contract('database', async () => {
  const { db } = await opened;
  // Two instances: two stores over one database.
  return { a: databaseChallengeStore(db), b: databaseChallengeStore(db) };
});

describe('challenge answers over HTTP', () => {
  test("an answer stored by one instance is served by another's handler; unknown and malformed tokens are 404; other paths pass", async () => {
    const { db } = await opened;
    const ordering = new HttpChallenges(databaseChallengeStore(db));
    const answering = new HttpChallenges(databaseChallengeStore(db));
    const server = http.createServer((req, res) => {
      if (!answering.handle(req, res)) res.writeHead(418).end();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      const t = token();
      await ordering.set(t, `${t}.key-authorization`);
      const ok = await fetch(`${base}/.well-known/acme-challenge/${t}`, { headers: { host: 'app.example.com' }, signal: AbortSignal.timeout(10_000) });
      assert.equal(ok.status, 200);
      assert.equal(await ok.text(), `${t}.key-authorization`);
      assert.equal(ok.headers.get('cache-control'), 'no-store');
      await ordering.delete(t);
      const gone = await fetch(`${base}/.well-known/acme-challenge/${t}`, { signal: AbortSignal.timeout(10_000) });
      assert.deepEqual([gone.status, await gone.text()], [404, 'no such challenge\n']);
      const malformed = await fetch(`${base}/.well-known/acme-challenge/a%27%20or%201=1`, { signal: AbortSignal.timeout(10_000) });
      assert.equal(malformed.status, 404);
      const other = await fetch(`${base}/elsewhere`, { signal: AbortSignal.timeout(10_000) });
      assert.equal(other.status, 418);
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
