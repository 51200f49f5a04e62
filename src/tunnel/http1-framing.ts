// Streaming HTTP/1.1 framing for the tunnel's byte pipe: rewrites request heads, refuses ambiguous framing, watches responses.
import { FORWARD_HEADER_NAMES } from './instance-calls.js';

/** What the edge learns from one request head. */
export interface RequestInfo {
  /** The method as sent, e.g. `GET`. */
  readonly method: string;
  /** The request-target as sent, e.g. `/a?b`. */
  readonly target: string;
  /** The single Host header's value as sent (without surrounding whitespace); absent only in HTTP/1.0. */
  readonly host: string | undefined;
  /** Connection holds the token `upgrade` and an Upgrade header is present. */
  readonly upgrade: boolean;
}

/**
 * Why a visitor's bytes were refused; the lead answers with this status and closes the connection.
 * (The framer itself never gives 413: it is there for the lead's own body limits.)
 */
export interface FramingRefusal {
  readonly status: 400 | 413 | 431 | 501;
  readonly message: string;
}

/** What a {@link RequestFramer} needs from the edge. */
export interface RequestFramerOptions {
  /**
   * Header lines added to each head, each ending in CRLF, e.g.
   * `'X-Forwarded-For: 1.2.3.4\r\nX-Forwarded-Proto: http\r\n'`. Encoded as latin1, so a value taken
   * from {@link RequestInfo} goes out byte for byte as the visitor sent it.
   */
  addHeaders(info: RequestInfo): string;
  /** Largest request head in bytes (request line + headers + the empty line); larger → 431. */
  maxHeadBytes: number;
}

/** Bytes the edge forwards for one pushed chunk: views of the input wherever the bytes are unchanged. */
export interface RequestChunk {
  readonly forward: Buffer[];
  readonly requests: RequestInfo[];
}

/** Bytes to send to the visitor for one pushed chunk of the app's output. */
export interface ResponseChunk {
  readonly forward: Buffer[];
  /** The status of each final response (101 included) whose head completed in this chunk. */
  readonly statuses: number[];
}

/**
 * The app's output cannot be framed. `forward` and `statuses` hold what preceded the bad head in the
 * same chunk (earlier responses, a 100 Continue): send those, then the 502, then close.
 */
export interface BrokenResponse extends ResponseChunk {
  readonly broken: string;
}

/** Largest response head (status line + headers) the watcher holds. */
export const MAX_RESPONSE_HEAD_BYTES = 64 * 1024;

/** Request headers the edge sets itself (lowercase): the visitor's copies are dropped. */
const EDGE_HEADER_NAMES = ['x-forwarded-for', 'x-forwarded-proto', 'x-forwarded-host', 'forwarded', 'x-real-ip', ...FORWARD_HEADER_NAMES].map((name) => Buffer.from(name));

const CR = 0x0d;
const LF = 0x0a;
const SP = 0x20;
const HT = 0x09;

/** tchar (RFC 9110 §5.6.2) by byte. */
const TCHAR = new Uint8Array(256);
for (const c of "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") TCHAR[c.charCodeAt(0)] = 1;
/** Hex digit value by byte, -1 for others. */
const HEX = new Int8Array(256).fill(-1);
for (let i = 0; i < 16; i++) {
  HEX['0123456789abcdef'.charCodeAt(i)] = i;
  HEX['0123456789ABCDEF'.charCodeAt(i)] = i;
}

const REQUEST_LINE = /^([!#$%&'*+\-.^_`|~0-9A-Za-z]+) ([^\x00-\x20\x7f]+) HTTP\/1\.([01])$/;
const STATUS_LINE = /^HTTP\/1\.[0-9] ([0-9]{3})(?: .*)?$/;
const DECIMAL = /^[0-9]{1,15}$/;

/** Most chunk-size hex digits: 15, and the value must fit a safe integer. */
const MAX_CHUNK_SIZE_DIGITS = 15;

function isControl(byte: number): boolean {
  return (byte < SP && byte !== HT) || byte === 0x7f;
}

/** Trims optional whitespace (SP, HT) only: String.trim would also eat latin1's NBSP (0xa0). */
function trimOws(s: string): string {
  let start = 0;
  let end = s.length;
  while (start < end && (s.charCodeAt(start) === SP || s.charCodeAt(start) === HT)) start++;
  while (end > start && (s.charCodeAt(end - 1) === SP || s.charCodeAt(end - 1) === HT)) end--;
  return start === 0 && end === s.length ? s : s.slice(start, end);
}

/** The Content-Length of a message from all its field values, or null when they are invalid or disagree. */
function parseContentLength(values: readonly string[]): number | null {
  if (values.length === 1 && DECIMAL.test(values[0]!)) return Number(values[0]); // the usual case, one plain value
  let length: number | undefined;
  for (const value of values) {
    for (const part of value.split(',')) {
      const digits = trimOws(part);
      if (!DECIMAL.test(digits)) return null;
      const n = Number(digits);
      if (length !== undefined && n !== length) return null;
      length = n;
    }
  }
  return length ?? null;
}

/**
 * Finds the end of a message head across chunks. The bytes of a partial head are copied into a
 * buffer that grows up to the limit (rather than kept as views, which would pin whole chunks).
 */
class HeadScanner {
  #store: Buffer | undefined;
  #held = 0;
  /** Head-relative offset of the current line's first byte. */
  #lineStart = 0;
  #lastByte = -1;
  /** Where the head begins in the chunk being scanned. */
  #segStart = 0;

  constructor(
    readonly limit: number,
    /** Requests: every LF must end a CRLF, and empty lines before the head are skipped (RFC 9112 §2.2). */
    readonly strict: boolean,
  ) {}

  /** True when no byte of a head is held. */
  get empty(): boolean {
    return this.#held === 0;
  }

  /** Where the current head begins in the chunk last scanned (meaningful after {@link scan}). */
  get segStart(): number {
    return this.#segStart;
  }

  /**
   * Scans `chunk` from `pos`: the offset just past the head's empty line, -1 when the chunk ended
   * inside the head (its bytes are held), or 'large' / 'bare LF' when the head is refused.
   */
  scan(chunk: Buffer, pos: number): number | 'large' | 'bare LF' {
    this.#segStart = pos;
    for (;;) {
      const lf = chunk.indexOf(LF, pos);
      if (lf === -1) {
        if (this.#held + chunk.length - this.#segStart > this.limit) return 'large';
        if (chunk.length > this.#segStart) this.#hold(chunk.subarray(this.#segStart));
        return -1;
      }
      const offset = this.#held + lf - this.#segStart;
      if (offset + 1 > this.limit) return 'large';
      const lineLength = offset - this.#lineStart;
      const previous = lf > this.#segStart ? chunk[lf - 1]! : this.#lastByte;
      const crlf = lineLength > 0 && previous === CR;
      if (this.strict && !crlf) return 'bare LF';
      if (lineLength === (crlf ? 1 : 0)) {
        if (this.#lineStart === 0 && this.strict) {
          this.#reset();
          this.#segStart = pos = lf + 1;
          continue;
        }
        return lf + 1;
      }
      this.#lineStart = offset + 1;
      pos = lf + 1;
    }
  }

  /** The complete head ending at `end` in `chunk` (a view when it lies in one chunk); the scanner is reset. */
  take(chunk: Buffer, end: number): Buffer {
    const tail = chunk.subarray(this.#segStart, end);
    const head = this.#held === 0 ? tail : Buffer.concat([this.#store!.subarray(0, this.#held), tail]);
    this.#reset();
    return head;
  }

  #hold(bytes: Buffer): void {
    const needed = this.#held + bytes.length;
    if (!this.#store || this.#store.length < needed) {
      const grown = Buffer.allocUnsafe(Math.min(this.limit, Math.max(needed, 2 * (this.#store?.length ?? 0), 1024)));
      if (this.#store) this.#store.copy(grown, 0, 0, this.#held);
      this.#store = grown;
    }
    bytes.copy(this.#store, this.#held);
    this.#held = needed;
    this.#lastByte = bytes[bytes.length - 1]!;
  }

  #reset(): void {
    this.#store = undefined;
    this.#held = 0;
    this.#lineStart = 0;
    this.#lastByte = -1;
  }
}

// Chunked body states.
const SIZE_START = 0;
const SIZE = 1;
const SIZE_WS = 2;
const EXT = 3;
const SIZE_LF = 4;
const DATA = 5;
const DATA_CR = 6;
const DATA_LF = 7;
const TRAILER_START = 8;
const TRAILER_NAME = 9;
const TRAILER_VALUE = 10;
const TRAILER_LF = 11;
const END_LF = 12;
const DONE = 13;

/**
 * A chunked body (RFC 9112 §7.1) followed byte by byte through its framing lines; chunk data is
 * skipped by count, never scanned. The bytes themselves are forwarded as they came.
 */
class ChunkedBody {
  #state = SIZE_START;
  #size = 0;
  #digits = 0;
  #remaining = 0;
  error: string | undefined;

  reset(): void {
    this.#state = SIZE_START;
    this.error = undefined;
  }

  get done(): boolean {
    return this.#state === DONE;
  }

  /** Consumes `chunk` from `pos`; returns where the body ended (then {@link done}) or `chunk.length`. On a framing error sets {@link error}. */
  consume(chunk: Buffer, pos: number): number {
    const length = chunk.length;
    while (pos < length) {
      if (this.#state === DATA) {
        const n = Math.min(this.#remaining, length - pos);
        pos += n;
        this.#remaining -= n;
        if (this.#remaining === 0) this.#state = DATA_CR;
        continue;
      }
      const byte = chunk[pos++]!;
      switch (this.#state) {
        case SIZE_START:
          if (HEX[byte]! < 0) return this.#fail('chunk size is not hex');
          this.#size = HEX[byte]!;
          this.#digits = 1;
          this.#state = SIZE;
          break;
        case SIZE:
          if (HEX[byte]! >= 0) {
            if (++this.#digits > MAX_CHUNK_SIZE_DIGITS) return this.#fail('chunk size too long');
            this.#size = this.#size * 16 + HEX[byte]!;
            if (this.#size > Number.MAX_SAFE_INTEGER) return this.#fail('chunk size too large');
          } else if (byte === CR) this.#state = SIZE_LF;
          else if (byte === 0x3b) this.#state = EXT;
          else if (byte === SP || byte === HT) this.#state = SIZE_WS;
          else return this.#fail('bad byte after chunk size');
          break;
        case SIZE_WS:
          if (byte === 0x3b) this.#state = EXT;
          else if (byte !== SP && byte !== HT) return this.#fail('bad byte after chunk size');
          break;
        case EXT:
          if (byte === CR) this.#state = SIZE_LF;
          else if (isControl(byte)) return this.#fail('control byte in chunk extension');
          break;
        case SIZE_LF:
          if (byte !== LF) return this.#fail('chunk size line not ended by CRLF');
          if (this.#size === 0) this.#state = TRAILER_START;
          else {
            this.#remaining = this.#size;
            this.#state = DATA;
          }
          break;
        case DATA_CR:
          if (byte !== CR) return this.#fail('chunk data not followed by CRLF');
          this.#state = DATA_LF;
          break;
        case DATA_LF:
          if (byte !== LF) return this.#fail('chunk data not followed by CRLF');
          this.#state = SIZE_START;
          break;
        case TRAILER_START:
          if (byte === CR) this.#state = END_LF;
          else if (TCHAR[byte]) this.#state = TRAILER_NAME;
          else return this.#fail('malformed trailer field');
          break;
        case TRAILER_NAME:
          if (byte === 0x3a) this.#state = TRAILER_VALUE;
          else if (!TCHAR[byte]) return this.#fail('malformed trailer field name');
          break;
        case TRAILER_VALUE:
          if (byte === CR) this.#state = TRAILER_LF;
          else if (isControl(byte)) return this.#fail('control byte in trailer field');
          break;
        case TRAILER_LF:
          if (byte !== LF) return this.#fail('trailer field not ended by CRLF');
          this.#state = TRAILER_START;
          break;
        case END_LF:
          if (byte !== LF) return this.#fail('chunked body not ended by CRLF');
          this.#state = DONE;
          return pos;
      }
    }
    return pos;
  }

  #fail(reason: string): number {
    this.error = reason;
    return -1;
  }
}

/** Control bytes other than HT, CR and LF, by byte (CR and LF are checked where lines end). */
const CTL = new Uint8Array(256);
for (let b = 0; b < 256; b++) if (isControl(b) && b !== CR && b !== LF) CTL[b] = 1;

/**
 * The lines of a complete head as offsets, without their line ends and without the empty line that
 * ends the head: line `i` is `head[bounds[2i], bounds[2i+1])`. A string when a byte breaks the rules
 * (a control byte anywhere, a CR not followed by LF) or the head is empty. Nothing is decoded.
 */
function headLines(head: Buffer): number[] | string {
  let bareCr = false;
  for (let i = 0; i < head.length; i++) {
    const byte = head[i]!;
    if (CTL[byte] === 1) return 'control byte in head';
    if (byte === CR && head[i + 1] !== LF) bareCr = true;
  }
  if (bareCr) return 'bare CR in head';
  const bounds: number[] = [];
  let start = 0;
  for (;;) {
    const lf = head.indexOf(LF, start);
    const end = lf > start && head[lf - 1] === CR ? lf - 1 : lf;
    if (lf === -1 || end === start) break; // the empty line that ends the head
    bounds.push(start, end);
    start = lf + 1;
  }
  return bounds.length === 0 ? 'empty head' : bounds;
}

/**
 * Checks the header line `head[start, end)` and returns the offset of its colon; a string when the
 * line is malformed (folded, no name, a name that is not a token).
 */
function fieldColon(head: Buffer, start: number, end: number): number | string {
  const first = head[start]!;
  if (first === SP || first === HT) return 'obsolete line folding';
  const colon = head.indexOf(0x3a, start);
  if (colon <= start || colon >= end) return 'header line without a name';
  for (let i = start; i < colon; i++) {
    if (TCHAR[head[i]!] !== 1) return `invalid header name ${JSON.stringify(head.toString('latin1', start, colon))}`;
  }
  return colon;
}

/** True when `head[start, end)` is `lower` (a lowercase ASCII name), whatever the case of its letters. */
function nameIs(head: Buffer, start: number, end: number, lower: Buffer): boolean {
  if (end - start !== lower.length) return false;
  for (let i = 0; i < lower.length; i++) {
    const byte = head[start + i]!;
    if ((byte >= 0x41 && byte <= 0x5a ? byte | 0x20 : byte) !== lower[i]) return false;
  }
  return true;
}

/** The field value after the colon at `colon`, up to `end`, without surrounding whitespace. */
function fieldValue(head: Buffer, colon: number, end: number): string {
  let start = colon + 1;
  while (start < end && (head[start] === SP || head[start] === HT)) start++;
  while (end > start && (head[end - 1] === SP || head[end - 1] === HT)) end--;
  return head.toString('latin1', start, end);
}

const HOST = Buffer.from('host');
const CONTENT_LENGTH = Buffer.from('content-length');
const TRANSFER_ENCODING = Buffer.from('transfer-encoding');
const CONNECTION = Buffer.from('connection');
const UPGRADE = Buffer.from('upgrade');
/** The lengths of every name a request head is searched for: other lines are only checked. */
const NAME_LENGTHS = new Set([HOST, CONTENT_LENGTH, TRANSFER_ENCODING, CONNECTION, UPGRADE, ...EDGE_HEADER_NAMES].map((name) => name.length));

function isEdgeHeader(head: Buffer, start: number, end: number): boolean {
  for (const name of EDGE_HEADER_NAMES) if (nameIs(head, start, end, name)) return true;
  return false;
}

function hasToken(values: readonly string[], token: string): boolean {
  return values.some((value) => value.split(',').some((part) => trimOws(part).toLowerCase() === token));
}

type RequestBody = { readonly kind: 'none' } | { readonly kind: 'length'; readonly length: number } | { readonly kind: 'chunked' };
const NO_BODY: RequestBody = { kind: 'none' };
const CHUNKED_BODY: RequestBody = { kind: 'chunked' };

function refuse(status: FramingRefusal['status'], message: string): FramingRefusal {
  return { status, message };
}

/**
 * Parses and rewrites one complete request head: the visitor's forwarding headers are dropped, every
 * other line is kept byte for byte (lines of a request always end in CRLF), and the edge's are added.
 */
function parseRequestHead(head: Buffer, options: RequestFramerOptions): { info: RequestInfo; head: Buffer; body: RequestBody } | FramingRefusal {
  const lines = headLines(head);
  if (typeof lines === 'string') return refuse(400, lines);
  const requestLine = REQUEST_LINE.exec(head.toString('latin1', lines[0], lines[1]));
  if (!requestLine) return refuse(400, 'malformed request line');
  const method = requestLine[1]!;
  const target = requestLine[2]!;
  const minor = requestLine[3]!;
  if (method === 'CONNECT') return refuse(501, 'CONNECT is not supported');
  let host: string | undefined;
  let hosts = 0;
  const contentLengths: string[] = [];
  const transferEncodings: string[] = [];
  const connection: string[] = [];
  let upgradeHeader = false;
  /** Line offsets of the visitor's forwarding headers, dropped from the head. */
  let dropped: number[] | undefined;
  for (let i = 2; i < lines.length; i += 2) {
    const start = lines[i]!;
    const end = lines[i + 1]!;
    const colon = fieldColon(head, start, end);
    if (typeof colon === 'string') return refuse(400, colon);
    if (!NAME_LENGTHS.has(colon - start)) continue; // no header the edge looks at
    if (nameIs(head, start, colon, HOST)) {
      hosts++;
      host = fieldValue(head, colon, end);
    } else if (nameIs(head, start, colon, CONTENT_LENGTH)) contentLengths.push(fieldValue(head, colon, end));
    else if (nameIs(head, start, colon, TRANSFER_ENCODING)) transferEncodings.push(fieldValue(head, colon, end));
    else if (nameIs(head, start, colon, CONNECTION)) connection.push(fieldValue(head, colon, end));
    else if (nameIs(head, start, colon, UPGRADE)) {
      if (fieldValue(head, colon, end) !== '') upgradeHeader = true;
    } else if (isEdgeHeader(head, start, colon)) (dropped ??= []).push(start, end + 2);
  }
  if (hosts > 1) return refuse(400, 'several Host headers');
  if (hosts === 0 && minor === '1') return refuse(400, 'HTTP/1.1 request without Host');
  let body = NO_BODY;
  if (transferEncodings.length > 0) {
    if (minor === '0') return refuse(400, 'Transfer-Encoding in an HTTP/1.0 request');
    if (contentLengths.length > 0) return refuse(400, 'both Transfer-Encoding and Content-Length');
    if (transferEncodings.length > 1) return refuse(400, 'several Transfer-Encoding headers');
    if (transferEncodings[0]!.toLowerCase() !== 'chunked') return refuse(501, 'Transfer-Encoding other than chunked');
    body = CHUNKED_BODY;
  } else if (contentLengths.length > 0) {
    const length = parseContentLength(contentLengths);
    if (length === null) return refuse(400, 'invalid Content-Length');
    if (length > 0) body = { kind: 'length', length };
  }
  const info: RequestInfo = { method, target, host, upgrade: upgradeHeader && hasToken(connection, 'upgrade') };
  return { info, head: rewriteHead(head, dropped ?? [], `${options.addHeaders(info)}\r\n`), body };
}

/** `head` without its final CRLF and the byte ranges in `dropped`, followed by `tail` (latin1). */
function rewriteHead(head: Buffer, dropped: readonly number[], tail: string): Buffer {
  let kept = head.length - 2;
  for (let i = 0; i < dropped.length; i += 2) kept -= dropped[i + 1]! - dropped[i]!;
  const out = Buffer.allocUnsafe(kept + Buffer.byteLength(tail, 'latin1'));
  let offset = 0;
  let from = 0;
  for (let i = 0; i < dropped.length; i += 2) {
    offset += head.copy(out, offset, from, dropped[i]);
    from = dropped[i + 1]!;
  }
  offset += head.copy(out, offset, from, head.length - 2);
  out.write(tail, offset, 'latin1');
  return out;
}

/** Pushes `chunk[from, to)` to `forward`: the chunk itself when whole, else a view; nothing when empty. */
function emit(forward: Buffer[], chunk: Buffer, from: number, to: number): void {
  if (to > from) forward.push(from === 0 && to === chunk.length ? chunk : chunk.subarray(from, to));
}

// Framer states, shared by both directions.
const HEAD = 0;
const LENGTH = 1;
const CHUNKED = 2;
/** Everything is forwarded as is: after an upgrade, or a close-delimited response body. */
const RAW = 3;

/**
 * Frames the visitor's side of one connection. Each request head is parsed, checked against the
 * rules that keep framing unambiguous (RFC 9112; anything doubtful is refused, never guessed), and
 * re-emitted without the forwarding headers the edge sets itself; bodies pass through as views of
 * the pushed chunks (the caller must not reuse a pushed chunk's memory while they are in flight).
 */
export class RequestFramer {
  readonly #options: RequestFramerOptions;
  readonly #scanner: HeadScanner;
  readonly #chunked = new ChunkedBody();
  #state = HEAD;
  #remaining = 0;
  #upgrading = false;
  #refusal: FramingRefusal | undefined;

  constructor(options: RequestFramerOptions) {
    this.#options = options;
    this.#scanner = new HeadScanner(options.maxHeadBytes, true);
  }

  /**
   * True after an upgrade request's head (and its body, if any): all later bytes are forwarded raw.
   * Should the app answer that request with anything but 101, the visitor's later bytes were not
   * framed: the lead ends the connection after that response.
   */
  get raw(): boolean {
    return this.#state === RAW;
  }

  /** True between requests: no body under way, no byte of a head held, nothing refused. */
  get idle(): boolean {
    return this.#state === HEAD && this.#scanner.empty && this.#refusal === undefined;
  }

  /**
   * Feeds visitor bytes. Returns the bytes to forward (heads rewritten; body bytes as views of the
   * input, never copied) and the requests whose heads completed in this chunk — or a refusal, after
   * which the framer is dead (every later push returns the same refusal; nothing of the refused
   * chunk is forwarded). A partial head is held inside until it completes.
   */
  push(chunk: Buffer): RequestChunk | FramingRefusal {
    if (this.#refusal) return this.#refusal;
    const forward: Buffer[] = [];
    const requests: RequestInfo[] = [];
    const length = chunk.length;
    let pos = 0;
    let run = 0;
    while (pos < length) {
      switch (this.#state) {
        case HEAD: {
          emit(forward, chunk, run, pos);
          const end = this.#scanner.scan(chunk, pos);
          if (end === 'large') return this.#refuse(431, 'request head too large');
          if (end === 'bare LF') return this.#refuse(400, 'line not ended by CRLF');
          if (end === -1) {
            pos = run = length;
            break;
          }
          const parsed = parseRequestHead(this.#scanner.take(chunk, end), this.#options);
          if ('status' in parsed) return this.#refuse(parsed.status, parsed.message);
          requests.push(parsed.info);
          forward.push(parsed.head);
          pos = run = end;
          this.#upgrading = parsed.info.upgrade;
          if (parsed.body.kind === 'length') {
            this.#remaining = parsed.body.length;
            this.#state = LENGTH;
          } else if (parsed.body.kind === 'chunked') {
            this.#chunked.reset();
            this.#state = CHUNKED;
          } else this.#endBody();
          break;
        }
        case LENGTH: {
          const n = Math.min(this.#remaining, length - pos);
          pos += n;
          this.#remaining -= n;
          if (this.#remaining === 0) this.#endBody();
          break;
        }
        case CHUNKED: {
          const end = this.#chunked.consume(chunk, pos);
          if (end === -1) return this.#refuse(400, `malformed chunked body: ${this.#chunked.error}`);
          pos = end;
          if (this.#chunked.done) this.#endBody();
          break;
        }
        default:
          pos = length;
      }
    }
    emit(forward, chunk, run, length);
    return { forward, requests };
  }

  #endBody(): void {
    this.#state = this.#upgrading ? RAW : HEAD;
  }

  #refuse(status: FramingRefusal['status'], message: string): FramingRefusal {
    this.#refusal = refuse(status, message);
    return this.#refusal;
  }
}

/** What a complete response head says about the response's body. */
interface ResponseHead {
  readonly status: number;
  readonly contentLength: number | undefined;
  /** Transfer-Encoding is present; `chunked` when its last coding is chunked. */
  readonly transferEncoding: 'none' | 'chunked' | 'other';
}

function parseResponseHead(head: Buffer): ResponseHead | string {
  const lines = headLines(head);
  if (typeof lines === 'string') return lines;
  const first = head.toString('latin1', lines[0], lines[1]);
  const statusLine = STATUS_LINE.exec(first);
  if (!statusLine) return `malformed status line ${JSON.stringify(first.slice(0, 64))}`;
  const status = Number(statusLine[1]);
  if (status < 100 || status > 599) return `status ${statusLine[1]} out of range`;
  const contentLengths: string[] = [];
  let lastCoding: string | undefined;
  for (let i = 2; i < lines.length; i += 2) {
    const start = lines[i]!;
    const end = lines[i + 1]!;
    const colon = fieldColon(head, start, end);
    if (typeof colon === 'string') return colon;
    if (nameIs(head, start, colon, CONTENT_LENGTH)) contentLengths.push(fieldValue(head, colon, end));
    else if (nameIs(head, start, colon, TRANSFER_ENCODING)) {
      const value = fieldValue(head, colon, end);
      lastCoding = value.slice(value.lastIndexOf(',') + 1);
    }
  }
  let contentLength: number | undefined;
  if (contentLengths.length > 0) {
    const length = parseContentLength(contentLengths);
    if (length === null) return 'invalid Content-Length';
    contentLength = length;
  }
  const last = lastCoding === undefined ? undefined : trimOws(lastCoding).toLowerCase();
  return { status, contentLength, transferEncoding: last === undefined ? 'none' : last === 'chunked' ? 'chunked' : 'other' };
}

interface Expected {
  readonly head: boolean;
  readonly upgrade: boolean;
}

/**
 * Follows the app's side of one connection: response heads are held until complete and checked,
 * then forwarded unchanged with their bodies (views of the pushed chunks). Tells the statuses for
 * the request log, and when the app's output cannot be framed (the visitor then gets a 502).
 * Unlike requests, a response's lines may end in a bare LF, as browsers accept.
 */
export class ResponseWatcher {
  readonly #scanner = new HeadScanner(MAX_RESPONSE_HEAD_BYTES, false);
  readonly #chunked = new ChunkedBody();
  readonly #expected: Expected[] = [];
  #state = HEAD;
  #remaining = 0;
  #broken: string | undefined;

  /** Called once per request forwarded, in order, so responses to HEAD have no body and the response to an upgrade request is known. */
  expect(method: string, upgrade: boolean): void {
    this.#expected.push({ head: method === 'HEAD', upgrade });
  }

  /** True between responses: every request forwarded has been answered in full, and no byte of another answer is held. */
  get idle(): boolean {
    return this.#state === HEAD && this.#expected.length === 0 && this.#scanner.empty;
  }

  /** True once the response framing is close-delimited or raw: the connection ends when the app closes it. */
  get closeDelimited(): boolean {
    return this.#state === RAW;
  }

  /**
   * Feeds app bytes. Returns the bytes to forward to the visitor and the status of each final
   * response whose head completed; 1xx interim responses (but 101) are forwarded and not reported;
   * 101 to an upgrade request switches to raw. When a head is invalid (bad status line or fields,
   * status outside 100–599, head over 64 KiB, invalid Content-Length, a 101 nobody asked for, or
   * bytes when no response is expected) returns {@link BrokenResponse}; every later push returns
   * the same reason with nothing to forward.
   */
  push(chunk: Buffer): ResponseChunk | BrokenResponse {
    const forward: Buffer[] = [];
    const statuses: number[] = [];
    if (this.#broken !== undefined) return { broken: this.#broken, forward, statuses };
    const length = chunk.length;
    let pos = 0;
    // Start of the bytes not yet put in `forward`; heads are forwarded unchanged, so a head that
    // lies in one chunk stays in the run.
    let run = 0;
    while (pos < length) {
      switch (this.#state) {
        case HEAD: {
          if (this.#scanner.empty && this.#expected.length === 0) return this.#break('response with no request', forward, chunk, run, pos, statuses);
          const end = this.#scanner.scan(chunk, pos);
          if (typeof end === 'string') return this.#break('response head too large', forward, chunk, run, this.#scanner.segStart, statuses);
          if (end === -1) {
            emit(forward, chunk, run, this.#scanner.segStart);
            pos = run = length;
            break;
          }
          const held = !this.#scanner.empty;
          const head = this.#scanner.take(chunk, end);
          const parsed = parseResponseHead(head);
          const problem = typeof parsed === 'string' ? parsed : this.#startBody(parsed, statuses);
          // Nothing of the bad head is forwarded: a held one is not in this chunk's run at all.
          if (problem !== undefined) return this.#break(problem, forward, chunk, run, held ? run : end - head.length, statuses);
          if (held) {
            forward.push(head);
            run = end;
          }
          pos = end;
          break;
        }
        case LENGTH: {
          const n = Math.min(this.#remaining, length - pos);
          pos += n;
          this.#remaining -= n;
          if (this.#remaining === 0) this.#state = HEAD;
          break;
        }
        case CHUNKED: {
          const end = this.#chunked.consume(chunk, pos);
          if (end === -1) return this.#break(`malformed chunked body: ${this.#chunked.error}`, forward, chunk, run, pos, statuses);
          pos = end;
          if (this.#chunked.done) this.#state = HEAD;
          break;
        }
        default:
          pos = length;
      }
    }
    emit(forward, chunk, run, length);
    return { forward, statuses };
  }

  /** Sets the body state after a complete head; a reason when the head cannot be accepted. */
  #startBody(head: ResponseHead, statuses: number[]): string | undefined {
    const { status } = head;
    if (status < 200 && status !== 101) return undefined;
    const expected = this.#expected.shift()!;
    if (status === 101) {
      if (!expected.upgrade) return '101 Switching Protocols to a request that did not ask to upgrade';
      statuses.push(status);
      this.#state = RAW;
      return undefined;
    }
    statuses.push(status);
    if (expected.head || status === 204 || status === 304) this.#state = HEAD;
    else if (head.transferEncoding === 'chunked') {
      this.#chunked.reset();
      this.#state = CHUNKED;
    } else if (head.transferEncoding === 'other' || head.contentLength === undefined) this.#state = RAW;
    else if (head.contentLength > 0) {
      this.#remaining = head.contentLength;
      this.#state = LENGTH;
    } else this.#state = HEAD;
    return undefined;
  }

  /** Marks the watcher broken; what preceded `cut` in this chunk is still forwarded. */
  #break(reason: string, forward: Buffer[], chunk: Buffer, run: number, cut: number, statuses: number[]): BrokenResponse {
    this.#broken = reason;
    emit(forward, chunk, run, cut);
    return { broken: reason, forward, statuses };
  }
}
