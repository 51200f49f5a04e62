// Unit tests of the list page cache: pages served only at the version they were read at, per list, within a byte bound.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { PageCache, type CachedPage } from '../../src/api/page-cache.js';

const page = (text: string, link?: string): CachedPage => ({ body: Buffer.from(text), link, etag: `"${text.length}"` });

test('a page is served for its list, version and URL only', () => {
  const cache = new PageCache(1024 * 1024);
  cache.set('deployments:alice', 3, '/api/v1/deployments', page('[1]', '<next>; rel="next"'));
  assert.deepEqual(cache.get('deployments:alice', 3, '/api/v1/deployments'), page('[1]', '<next>; rel="next"'));
  assert.equal(cache.get('deployments:alice', 4, '/api/v1/deployments'), undefined, 'another version');
  assert.equal(cache.get('deployments:alice', 2, '/api/v1/deployments'), undefined, 'an older version');
  assert.equal(cache.get('deployments:bob', 3, '/api/v1/deployments'), undefined, 'another user');
  assert.equal(cache.get('deployments:alice', 3, '/api/v1/deployments?limit=5'), undefined, 'another query');
});

test('a newer version drops the older pages; an answer read at an older version is not kept', () => {
  const cache = new PageCache(1024 * 1024);
  cache.set('l', 1, '/a', page('one'));
  cache.set('l', 1, '/b', page('one-b'));
  cache.set('l', 2, '/a', page('two'));
  assert.equal(cache.get('l', 1, '/b'), undefined);
  assert.equal(cache.get('l', 2, '/b'), undefined, 'pages of version 1 are gone, not carried to 2');
  // A request that read version 1 before a write finishes after the cache saw version 2.
  cache.set('l', 1, '/a', page('stale'));
  assert.deepEqual(cache.get('l', 2, '/a'), page('two'));
  assert.equal(cache.get('l', 1, '/a'), undefined);
});

test('the bytes held stay under the bound; the least recently used list goes first', () => {
  const body = 'x'.repeat(500); // ~700 bytes counted: 8 lists fit in 6,000
  const cache = new PageCache(6000);
  for (let i = 0; i < 8; i += 1) cache.set(`l${i}`, 1, '/', page(body));
  for (let i = 0; i < 8; i += 1) assert.ok(cache.get(`l${i}`, 1, '/') !== undefined, `l${i} is held`);
  assert.ok(cache.get('l0', 1, '/') !== undefined); // l0 is now the most recently used, l1 the least
  cache.set('l8', 1, '/', page(body));
  assert.ok(cache.bytes <= 6000, `${cache.bytes} bytes held`);
  assert.equal(cache.get('l1', 1, '/'), undefined, 'l1 was the least recently used');
  assert.ok(cache.get('l0', 1, '/') !== undefined);
  assert.ok(cache.get('l8', 1, '/') !== undefined);
  // A page too big for its share of the bound is not kept at all.
  cache.set('huge', 1, '/', page('y'.repeat(1000)));
  assert.equal(cache.get('huge', 1, '/'), undefined);
  assert.ok(cache.bytes <= 6000);
});

test('a list keeps a bounded number of pages, and the count of bytes follows replacements and drops', () => {
  const cache = new PageCache(10 * 1024 * 1024);
  for (let i = 0; i < 100; i += 1) cache.set('l', 1, `/?cursor=${i}`, page('p'));
  assert.equal(cache.get('l', 1, '/?cursor=0'), undefined, 'the oldest pages went');
  assert.ok(cache.get('l', 1, '/?cursor=99') !== undefined);
  const held = cache.bytes;
  cache.set('l', 1, '/?cursor=99', page('p'));
  assert.equal(cache.bytes, held, 'replacing a page does not count it twice');
  cache.delete('l');
  assert.equal(cache.bytes, 0);
});
