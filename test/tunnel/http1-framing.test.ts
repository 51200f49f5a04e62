// Unit tests of the tunnel's streaming HTTP/1.1 framer (request heads rewritten, ambiguous framing refused) and response watcher.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  MAX_RESPONSE_HEAD_BYTES,
  RequestFramer,
  ResponseWatcher,
  type FramingRefusal,
  type RequestInfo,
} from '../../src/tunnel/http1-framing.js';

const ADDED = 'X-Forwarded-For: 203.0.113.9\r\nX-Forwarded-Proto: https\r\n';

function newFramer(maxHeadBytes = 8192): RequestFramer {
  return new RequestFramer({ addHeaders: () => ADDED, maxHeadBytes });
}

interface FramedResult {
  readonly bytes: string;
  readonly requests: RequestInfo[];
  readonly refusal?: FramingRefusal;
}

/** Pushes `chunks` in order and joins what the framer forwards (latin1, so every byte shows). */
function frame(chunks: readonly Buffer[], framer = newFramer()): FramedResult {
  const out: Buffer[] = [];
  const requests: RequestInfo[] = [];
  for (const chunk of chunks) {
    const result = framer.push(chunk);
    if ('status' in result) return { bytes: Buffer.concat(out).toString('latin1'), requests, refusal: result };
    out.push(...result.forward);
    requests.push(...result.requests);
  }
  return { bytes: Buffer.concat(out).toString('latin1'), requests };
}

function bytewise(buffer: Buffer): Buffer[] {
  const chunks: Buffer[] = [];
  for (let i = 0; i < buffer.length; i++) chunks.push(buffer.subarray(i, i + 1));
  return chunks;
}

/** The refusal status for a stream pushed whole, or 'accepted'. */
function verdict(text: string): number | 'accepted' {
  const result = frame([Buffer.from(text, 'latin1')]);
  return result.refusal?.status ?? 'accepted';
}

const PIPELINE = [
  'GET /a?b=1 HTTP/1.1\r\nHost: app.example\r\nX-Forwarded-For: 6.6.6.6\r\nAccept: */*\r\n\r\n',
  'POST /upload HTTP/1.1\r\nHost: app.example\r\nContent-Length: 11\r\n\r\nhello world',
  'POST /chunked HTTP/1.1\r\nhost: app.example\r\nTransfer-Encoding: chunked\r\n\r\n',
  '5;name=value\r\nab\r\nc\r\n10\r\n0123456789abcdef\r\n0\r\nChecksum: 1\r\nOther: 2\r\n\r\n',
  'GET /last HTTP/1.1\r\nHost: app.example\r\nforwarded: for=6.6.6.6\r\n\r\n',
].join('');

const PIPELINE_FORWARDED = [
  `GET /a?b=1 HTTP/1.1\r\nHost: app.example\r\nAccept: */*\r\n${ADDED}\r\n`,
  `POST /upload HTTP/1.1\r\nHost: app.example\r\nContent-Length: 11\r\n${ADDED}\r\nhello world`,
  `POST /chunked HTTP/1.1\r\nhost: app.example\r\nTransfer-Encoding: chunked\r\n${ADDED}\r\n`,
  '5;name=value\r\nab\r\nc\r\n10\r\n0123456789abcdef\r\n0\r\nChecksum: 1\r\nOther: 2\r\n\r\n',
  `GET /last HTTP/1.1\r\nHost: app.example\r\n${ADDED}\r\n`,
].join('');

describe('RequestFramer', () => {
  it('drops the visitor forwarding headers, keeps every other line byte for byte, and adds the edge ones', () => {
    const head =
      'GET /x HTTP/1.1\r\nHost: a.example\r\nx-forwarded-for: 1.1.1.1\r\nX-FORWARDED-PROTO: http\r\nX-Forwarded-Host: evil\r\n' +
      'Forwarded: for=1.1.1.1\r\nX-Real-IP: 1.1.1.1\r\nX-Forwarded-Fort: kept\r\nConnection:  keep-alive \r\ncOOkie: a=\tb\xe9\r\n\r\n';
    const seen: RequestInfo[] = [];
    const framer = new RequestFramer({
      addHeaders: (info) => {
        seen.push(info);
        return `X-Forwarded-Host: ${info.host}\r\n`;
      },
      maxHeadBytes: 8192,
    });
    const result = frame([Buffer.from(head, 'latin1')], framer);
    assert.equal(
      result.bytes,
      'GET /x HTTP/1.1\r\nHost: a.example\r\nX-Forwarded-Fort: kept\r\nConnection:  keep-alive \r\ncOOkie: a=\tb\xe9\r\nX-Forwarded-Host: a.example\r\n\r\n',
    );
    assert.deepEqual(result.requests, [{ method: 'GET', target: '/x', host: 'a.example', upgrade: false }]);
    assert.deepEqual(seen, result.requests);
  });

  it('frames a pipelined stream (Content-Length body, chunked body with extensions and trailers) the same whole, split anywhere, or byte by byte', () => {
    const input = Buffer.from(PIPELINE, 'latin1');
    const whole = frame([input]);
    assert.equal(whole.refusal, undefined);
    assert.equal(whole.bytes, PIPELINE_FORWARDED);
    assert.deepEqual(
      whole.requests.map((r) => `${r.method} ${r.target} ${r.host}`),
      ['GET /a?b=1 app.example', 'POST /upload app.example', 'POST /chunked app.example', 'GET /last app.example'],
    );
    assert.deepEqual(frame(bytewise(input)), whole);
    for (let cut = 1; cut < input.length; cut++) {
      assert.deepEqual(frame([input.subarray(0, cut), input.subarray(cut)]), whole, `cut at ${cut}`);
    }
  });

  it('forwards body bytes as views of the pushed chunk, never copies', () => {
    const input = Buffer.from('POST /u HTTP/1.1\r\nHost: h\r\nContent-Length: 6\r\n\r\nabcdef', 'latin1');
    const result = newFramer().push(input);
    assert.ok(!('status' in result));
    assert.equal(result.forward.length, 2);
    const body = result.forward[1]!;
    assert.equal(body.toString(), 'abcdef');
    assert.equal(body.buffer, input.buffer);
    assert.equal(body.byteOffset, input.byteOffset + input.length - 6);
    // A later chunk that is all body is forwarded as that very chunk.
    const framer = newFramer();
    framer.push(Buffer.from('POST /u HTTP/1.1\r\nHost: h\r\nContent-Length: 6\r\n\r\n'));
    const next = Buffer.from('abc');
    const later = framer.push(next);
    assert.ok(!('status' in later));
    assert.equal(later.forward[0], next);
  });

  it('skips empty lines before a request line and accepts HTTP/1.0 without Host', () => {
    const result = frame([Buffer.from('\r\n\r\nGET / HTTP/1.0\r\n\r\n')]);
    assert.equal(result.bytes, `GET / HTTP/1.0\r\n${ADDED}\r\n`);
    assert.deepEqual(result.requests, [{ method: 'GET', target: '/', host: undefined, upgrade: false }]);
  });

  it('refuses malformed request lines', () => {
    for (const line of [
      'GET  / HTTP/1.1',
      'GET / HTTP/1.1 ',
      'GET /a b HTTP/1.1',
      'GET /\x01 HTTP/1.1',
      'GET /\x7f HTTP/1.1',
      'G@T / HTTP/1.1',
      'GET / HTTP/1.2',
      'GET / HTTP/2.0',
      'GET / http/1.1',
      'GET /',
      ' GET / HTTP/1.1',
    ]) {
      assert.equal(verdict(`${line}\r\nHost: h\r\n\r\n`), 400, JSON.stringify(line));
    }
    assert.equal(verdict('GET /a%20b?c=d HTTP/1.1\r\nHost: h\r\n\r\n'), 'accepted');
  });

  it('refuses malformed header lines', () => {
    for (const field of [
      'Host : h',
      'X-A\t: 1',
      ' X-A: 1',
      'X-A: 1\r\n folded',
      'X-A: 1\r\n\tfolded',
      'X-A: 1\nX-B: 2',
      'X-A: 1\rX-B: 2',
      'X-A: a\x00b',
      'X-A: a\x1bb',
      'X-A: a\x7fb',
      'X(A): 1',
      'no colon here',
      ': empty name',
    ]) {
      assert.equal(verdict(`GET / HTTP/1.1\r\nHost: h\r\n${field}\r\n\r\n`), 400, JSON.stringify(field));
    }
    assert.equal(verdict('GET / HTTP/1.1\nHost: h\r\n\r\n'), 400, 'bare LF after the request line');
    assert.equal(verdict('GET / HTTP/1.1\r\nHost: h\r\n\n'), 400, 'bare LF as the empty line');
    assert.equal(verdict('GET / HTTP/1.1\r\nHost: h\r\nX-A: tab\there \xff\r\n\r\n'), 'accepted');
  });

  it('wants exactly one Host in HTTP/1.1, at most one in HTTP/1.0', () => {
    assert.equal(verdict('GET / HTTP/1.1\r\n\r\n'), 400);
    assert.equal(verdict('GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n'), 400);
    assert.equal(verdict('GET / HTTP/1.0\r\nHost: a\r\nhost: b\r\n\r\n'), 400);
    assert.equal(verdict('GET / HTTP/1.0\r\nHost: a\r\n\r\n'), 'accepted');
  });

  it('checks Content-Length: digits only, at most 15, every value equal', () => {
    for (const value of ['1, 2', '+1', '-1', '0x10', '1.0', '', '1 1', '1,', '1234567890123456']) {
      assert.equal(verdict(`POST / HTTP/1.1\r\nHost: h\r\nContent-Length: ${value}\r\n\r\n`), 400, JSON.stringify(value));
    }
    assert.equal(verdict('POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab'), 400);
    const same = frame([Buffer.from('POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 2, 2\r\nContent-Length: 2\r\n\r\nabGET / HTTP/1.1\r\nHost: h\r\n\r\n')]);
    assert.equal(same.refusal, undefined);
    assert.equal(same.requests.length, 2);
    assert.equal(verdict('POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 123456789012345\r\n\r\n'), 'accepted');
  });

  it('accepts only Transfer-Encoding: chunked, alone, in HTTP/1.1', () => {
    const chunked = (te: string, extra = '', version = '1.1') =>
      verdict(`POST / HTTP/${version}\r\nHost: h\r\nTransfer-Encoding: ${te}\r\n${extra}\r\n0\r\n\r\n`);
    assert.equal(chunked('chunked'), 'accepted');
    assert.equal(chunked('CHUNKED'), 'accepted');
    assert.equal(chunked('xchunked'), 501);
    assert.equal(chunked('gzip, chunked'), 501);
    assert.equal(chunked('chunked, chunked'), 501);
    assert.equal(chunked('identity'), 501);
    assert.equal(chunked('chunked', 'Transfer-Encoding: chunked\r\n'), 400);
    assert.equal(chunked('chunked', 'Content-Length: 5\r\n'), 400);
    assert.equal(chunked('chunked', '', '1.0'), 400);
  });

  it('refuses the request-smuggling classics', () => {
    for (const text of [
      'POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n',
      'POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n0\r\n\r\n',
      'POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: x\r\n\r\n0\r\n\r\n',
      'POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: xchunked\r\n\r\n0\r\n\r\n',
      'POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1, 2\r\n\r\nab',
      'POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding : chunked\r\n\r\n0\r\n\r\n',
      'POST / HTTP/1.1\r\nHost: h\r\nContent-Length : 2\r\n\r\nab',
      'POST / HTTP/1.1\r\nHost: h\r\nX-A: 1\r\n Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n',
      'POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding:\x0bchunked\r\n\r\n0\r\n\r\n',
    ]) {
      assert.notEqual(verdict(text), 'accepted', JSON.stringify(text));
    }
  });

  it('refuses malformed chunked bodies', () => {
    const head = 'POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n';
    for (const body of [
      'g\r\n',
      '\r\n',
      '0000000000000001\r\nx\r\n',
      'FFFFFFFFFFFFFF\r\n',
      '-1\r\n',
      '3 \r\nabc\r\n',
      '3\nabc\r\n',
      '3\r\nabcd\r\n',
      '3\r\nabc\n0\r\n\r\n',
      '3;a=\x01\r\nabc\r\n',
      '0\r\n X: folded\r\n\r\n',
      '0\r\nX : 1\r\n\r\n',
      '0\r\nX: 1\n\r\n',
      '0\r\nX: \x00\r\n\r\n',
      '0\r\n\r\r\n',
    ]) {
      assert.equal(verdict(head + body), 400, JSON.stringify(body));
    }
    assert.equal(verdict(`${head}00000000000000A ; ext="q" ;b\r\n0123456789\r\n0\r\n\r\n`), 'accepted');
  });

  it('refuses a head larger than maxHeadBytes with 431, even while it is still partial', () => {
    const head = 'GET / HTTP/1.1\r\nHost: h\r\n\r\n';
    assert.equal(frame([Buffer.from(head)], newFramer(head.length)).refusal, undefined);
    assert.equal(frame([Buffer.from(head)], newFramer(head.length - 1)).refusal?.status, 431);
    const endless = bytewise(Buffer.from(`GET / HTTP/1.1\r\nX-A: ${'a'.repeat(200)}`));
    assert.equal(frame(endless, newFramer(100)).refusal?.status, 431);
  });

  it('copies a partial head, so the pushed chunk may be reused once push returns', () => {
    const framer = newFramer();
    const part = Buffer.from('GET /first HTTP/1.1\r\nHo');
    assert.deepEqual(framer.push(part), { forward: [], requests: [] });
    part.fill(0x21);
    const result = framer.push(Buffer.from('st: h\r\n\r\n'));
    assert.ok(!('status' in result));
    assert.equal(Buffer.concat(result.forward).toString(), `GET /first HTTP/1.1\r\nHost: h\r\n${ADDED}\r\n`);
  });

  it('refuses CONNECT', () => {
    assert.equal(verdict('CONNECT h:443 HTTP/1.1\r\nHost: h:443\r\n\r\n'), 501);
  });

  it('stays dead after a refusal and forwards nothing of the refused chunk', () => {
    const framer = newFramer();
    const first = framer.push(Buffer.from('GET / HTTP/1.1\r\nHost: h\r\n\r\nGET / HTTP/1.1\r\n\r\n'));
    assert.ok('status' in first);
    assert.equal(first.status, 400);
    assert.equal(framer.push(Buffer.from('GET / HTTP/1.1\r\nHost: h\r\n\r\n')), first);
  });

  it('switches to raw after an upgrade request and its body', () => {
    const framer = newFramer();
    const upgrade = 'GET /ws HTTP/1.1\r\nHost: h\r\nConnection: keep-alive, Upgrade\r\nUpgrade: websocket\r\nContent-Length: 2\r\n\r\n';
    const result = frame([Buffer.from(`${upgrade}ab\x00\x01GET / HTTP/1.1\r\nX-Forwarded-For: x\r\n\r\n`, 'latin1')], framer);
    assert.equal(result.refusal, undefined);
    assert.deepEqual(result.requests, [{ method: 'GET', target: '/ws', host: 'h', upgrade: true }]);
    assert.equal(result.bytes, `${upgrade.slice(0, -2)}${ADDED}\r\nab\x00\x01GET / HTTP/1.1\r\nX-Forwarded-For: x\r\n\r\n`);
    assert.equal(framer.raw, true);
    const later = Buffer.from('\xff\xfe', 'latin1');
    assert.deepEqual(framer.push(later), { forward: [later], requests: [] });
  });

  it('needs both the Connection token and an Upgrade header to upgrade', () => {
    for (const fields of ['Upgrade: websocket\r\n', 'Connection: upgrade\r\n', 'Connection: upgrades\r\nUpgrade: websocket\r\n']) {
      const framer = newFramer();
      const result = frame([Buffer.from(`GET / HTTP/1.1\r\nHost: h\r\n${fields}\r\n`)], framer);
      assert.equal(result.requests[0]?.upgrade, false, fields);
      assert.equal(framer.raw, false, fields);
    }
    const framer = newFramer();
    const result = frame([Buffer.from('GET / HTTP/1.1\r\nHost: h\r\nConnection: x\r\nconnection: UPGRADE\r\nUpgrade: h2c\r\n\r\n')], framer);
    assert.equal(result.requests[0]?.upgrade, true);
    assert.equal(framer.raw, true);
  });
});

interface WatchedResult {
  readonly bytes: string;
  readonly statuses: number[];
  readonly broken?: string;
}

/** A watcher expecting `methods` (a trailing `!` marks an upgrade request). */
function newWatcher(...methods: string[]): ResponseWatcher {
  const watcher = new ResponseWatcher();
  for (const method of methods) watcher.expect(method.replace('!', ''), method.endsWith('!'));
  return watcher;
}

function watch(watcher: ResponseWatcher, chunks: readonly Buffer[]): WatchedResult {
  const out: Buffer[] = [];
  const statuses: number[] = [];
  for (const chunk of chunks) {
    const result = watcher.push(chunk);
    out.push(...result.forward);
    statuses.push(...result.statuses);
    if ('broken' in result) return { bytes: Buffer.concat(out).toString('latin1'), statuses, broken: result.broken };
  }
  return { bytes: Buffer.concat(out).toString('latin1'), statuses };
}

describe('ResponseWatcher', () => {
  it('gives no body to the response to HEAD, nor to 204 and 304', () => {
    const text =
      'HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n' +
      'HTTP/1.1 204 No Content\r\n\r\n' +
      'HTTP/1.1 304 Not Modified\r\nContent-Length: 9\r\n\r\n' +
      'HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok';
    const watcher = newWatcher('HEAD', 'GET', 'GET', 'GET');
    assert.deepEqual(watch(watcher, [Buffer.from(text)]), { bytes: text, statuses: [200, 204, 304, 200] });
    assert.equal(watcher.closeDelimited, false);
    assert.deepEqual(watch(newWatcher('HEAD', 'GET', 'GET', 'GET'), bytewise(Buffer.from(text))), { bytes: text, statuses: [200, 204, 304, 200] });
  });

  it('forwards 100 Continue without reporting it, then reports the final status', () => {
    const text = 'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n';
    assert.deepEqual(watch(newWatcher('POST'), [Buffer.from(text)]), { bytes: text, statuses: [201] });
    // The 100 is forwarded as soon as its head is complete.
    const watcher = newWatcher('POST');
    const first = watcher.push(Buffer.from('HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 2'));
    assert.deepEqual({ bytes: Buffer.concat(first.forward).toString(), statuses: first.statuses }, { bytes: 'HTTP/1.1 100 Continue\r\n\r\n', statuses: [] });
  });

  it('switches to raw after 101 to an upgrade request', () => {
    const watcher = newWatcher('GET!');
    const text = 'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n\x81\x05hello';
    assert.deepEqual(watch(watcher, [Buffer.from(text, 'latin1')]), { bytes: text, statuses: [101] });
    assert.equal(watcher.closeDelimited, true);
    const frame = Buffer.from('HTTP/1.1 999 not a response\r\n\r\n');
    assert.deepEqual(watcher.push(frame), { forward: [frame], statuses: [] });
  });

  it('calls a 101 to a request that did not ask to upgrade broken', () => {
    const result = watch(newWatcher('GET'), [Buffer.from('HTTP/1.1 101 Switching Protocols\r\n\r\n')]);
    assert.equal(result.bytes, '');
    assert.match(result.broken ?? '', /101/);
  });

  it('follows a chunked body with extensions and trailers split at every byte', () => {
    const text =
      'HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n' +
      '4;x=y\r\nwiki\r\n5\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nExpires: never\r\n\r\n' +
      'HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\nContent-Length: 100\r\n\r\n0\r\n\r\n';
    const input = Buffer.from(text);
    const expected = { bytes: text, statuses: [200, 404] };
    assert.deepEqual(watch(newWatcher('GET', 'GET'), [input]), expected);
    assert.deepEqual(watch(newWatcher('GET', 'GET'), bytewise(input)), expected);
    for (let cut = 1; cut < input.length; cut++) {
      assert.deepEqual(watch(newWatcher('GET', 'GET'), [input.subarray(0, cut), input.subarray(cut)]), expected, `cut at ${cut}`);
    }
  });

  it('calls a malformed chunked body broken', () => {
    const result = watch(newWatcher('GET'), [Buffer.from('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n')]);
    assert.match(result.broken ?? '', /chunk/);
  });

  it('forwards a close-delimited body as is, whatever it holds', () => {
    for (const head of ['HTTP/1.1 200 OK\r\n\r\n', 'HTTP/1.0 200 OK\r\nTransfer-Encoding: gzip\r\nContent-Length: 1\r\n\r\n']) {
      const watcher = newWatcher('GET');
      const text = `${head}HTTP/1.1 000 not a head\r\n\r\n`;
      assert.deepEqual(watch(watcher, [Buffer.from(text)]), { bytes: text, statuses: [200] });
      assert.equal(watcher.closeDelimited, true);
      const more = Buffer.from('more');
      assert.deepEqual(watcher.push(more), { forward: [more], statuses: [] });
    }
  });

  it('accepts a status line without a reason, or with an empty one', () => {
    for (const line of ['HTTP/1.1 200', 'HTTP/1.1 200 ', 'HTTP/1.0 599 x']) {
      const text = `${line}\r\nContent-Length: 0\r\n\r\n`;
      assert.equal(watch(newWatcher('GET'), [Buffer.from(text)]).broken, undefined, line);
    }
  });

  it('accepts response lines ended by a bare LF', () => {
    const text = 'HTTP/1.1 200 OK\nContent-Length: 2\n\nokHTTP/1.1 204 No Content\r\nX: 1\n\r\n';
    assert.deepEqual(watch(newWatcher('GET', 'GET'), bytewise(Buffer.from(text))), { bytes: text, statuses: [200, 204] });
  });

  it('calls invalid heads broken', () => {
    const lines = [
      'HTTP/1.1 099 Low',
      'HTTP/1.1 600 High',
      'HTTP/1.1 2000 OK',
      'HTTP/1.1 20 OK',
      'HTTP/2 200 OK',
      'HTTP/1.1  200 OK',
      'garbage',
      '',
      'HTTP/1.1 200 OK\r\nContent-Length: 1, 2',
      'HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2',
      'HTTP/1.1 200 OK\r\nContent-Length: -1',
      'HTTP/1.1 200 OK\r\nBad Name: 1',
      'HTTP/1.1 200 OK\r\nX: 1\r\n folded',
      'HTTP/1.1 200 OK\r\nX: \x00',
    ];
    for (const line of lines) {
      const result = watch(newWatcher('GET'), [Buffer.from(`${line}\r\n\r\nbody`)]);
      assert.equal(result.bytes, '', JSON.stringify(line));
      assert.equal(typeof result.broken, 'string', JSON.stringify(line));
    }
    const huge = Buffer.from(`HTTP/1.1 200 OK\r\nX: ${'a'.repeat(MAX_RESPONSE_HEAD_BYTES)}`);
    assert.equal(typeof watch(newWatcher('GET'), [huge]).broken, 'string');
  });

  it('still forwards what preceded a broken head in the same chunk, then stays broken', () => {
    const watcher = newWatcher('GET', 'GET');
    const first = 'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nab';
    assert.deepEqual(watch(watcher, [Buffer.from(first)]), { bytes: first, statuses: [200] });
    const result = watcher.push(Buffer.from('cHTTP/1.1 600 Nope\r\n\r\n'));
    assert.ok('broken' in result);
    assert.deepEqual({ bytes: Buffer.concat(result.forward).toString(), statuses: result.statuses }, { bytes: 'c', statuses: [] });
    const again = watcher.push(Buffer.from('HTTP/1.1 200 OK\r\n\r\n'));
    assert.deepEqual(again, { broken: result.broken, forward: [], statuses: [] });
  });

  it('calls bytes nobody asked for broken', () => {
    assert.equal(typeof watch(new ResponseWatcher(), [Buffer.from('HTTP/1.1 200 OK\r\n\r\n')]).broken, 'string');
    const after = watch(newWatcher('GET'), [Buffer.from('HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nxHTTP/1.1 200 OK\r\n\r\n')]);
    assert.deepEqual(after, { bytes: 'HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx', statuses: [200], broken: 'response with no request' });
  });

  it('forwards a response in one chunk as that chunk, and body bytes as views', () => {
    const chunk = Buffer.from('HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nbody');
    assert.deepEqual(newWatcher('GET').push(chunk), { forward: [chunk], statuses: [200] });
    const watcher = newWatcher('GET');
    const head = Buffer.from('HTTP/1.1 200 OK\r\nContent-Length: 4\r\n');
    assert.deepEqual(watcher.push(head), { forward: [], statuses: [] });
    const rest = Buffer.from('\r\nbody');
    const result = watcher.push(rest);
    assert.ok(!('broken' in result));
    assert.equal(Buffer.concat(result.forward).toString(), `${head}\r\nbody`);
    const body = result.forward[1]!;
    assert.equal(body.toString(), 'body');
    assert.equal(body.buffer, rest.buffer);
  });
});
