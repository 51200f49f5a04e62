// A raw HTTP/1.1 client over a loopback socket: sends exactly the bytes it is given (broken framing included) and reads one answer.
import net from 'node:net';

/** A request as bytes on the wire: the head is written verbatim, so it may be malformed on purpose. */
export interface RawRequest {
  readonly method: string;
  readonly target: string;
  /** Header lines in order; duplicates allowed. No Content-Length is added unless `contentLength` says so. */
  readonly headers: readonly (readonly [string, string])[];
  readonly body?: Buffer;
  /** 'auto': the body's length; a number: that value (a lie); 'none': no header (e.g. chunked). */
  readonly contentLength?: 'auto' | 'none' | number;
  /** Half-close the socket after writing (the body ends at EOF). */
  readonly halfClose?: boolean;
}

export interface RawResponse {
  /** 'response': a status line and headers arrived; 'closed': the server closed or reset before that; 'timeout': nothing in time. */
  readonly outcome: 'response' | 'closed' | 'timeout';
  readonly status: number;
  readonly headers: Readonly<Record<string, string[]>>;
  readonly body: Buffer;
  /** The body was still streaming when the client stopped reading (long-lived text streams). */
  readonly cutShort: boolean;
  /** The head arrived but the body never completed within the timeout. */
  readonly bodyTimedOut: boolean;
}

export interface RawOptions {
  readonly timeoutMs: number;
  /** Once a streamed text body has started, stop reading after this long (followed logs never end). */
  readonly streamCutMs: number;
}

/** The bytes of a request: request line, headers (plus Content-Length when asked), blank line, body. */
export function encodeRequest(request: RawRequest): Buffer {
  const lines = [`${request.method} ${request.target} HTTP/1.1`];
  for (const [name, value] of request.headers) lines.push(`${name}: ${value}`);
  const body = request.body ?? Buffer.alloc(0);
  const length = request.contentLength ?? (body.length > 0 ? 'auto' : 'none');
  if (length === 'auto') lines.push(`Content-Length: ${body.length}`);
  else if (typeof length === 'number') lines.push(`Content-Length: ${length}`);
  return Buffer.concat([Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'utf8'), body]);
}

interface Head {
  status: number;
  headers: Record<string, string[]>;
  bodyStart: number;
}

function parseHead(data: Buffer): Head | undefined {
  const end = data.indexOf('\r\n\r\n');
  if (end < 0) return undefined;
  const lines = data.subarray(0, end).toString('latin1').split('\r\n');
  const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(lines[0] ?? '')?.[1] ?? NaN);
  const headers: Record<string, string[]> = {};
  for (const line of lines.slice(1)) {
    const colon = line.indexOf(':');
    if (colon <= 0) continue;
    const name = line.slice(0, colon).trim().toLowerCase();
    (headers[name] ??= []).push(line.slice(colon + 1).trim());
  }
  return { status, headers, bodyStart: end + 4 };
}

/** Decodes a chunked body; `complete` once the last chunk arrived. */
function dechunk(data: Buffer): { body: Buffer; complete: boolean } {
  const parts: Buffer[] = [];
  let at = 0;
  for (;;) {
    const lineEnd = data.indexOf('\r\n', at);
    if (lineEnd < 0) return { body: Buffer.concat(parts), complete: false };
    const size = parseInt(data.subarray(at, lineEnd).toString('latin1').split(';')[0] ?? '', 16);
    if (Number.isNaN(size)) return { body: Buffer.concat(parts), complete: true };
    if (size === 0) return { body: Buffer.concat(parts), complete: true };
    if (data.length < lineEnd + 2 + size + 2) {
      parts.push(data.subarray(lineEnd + 2, Math.min(data.length, lineEnd + 2 + size)));
      return { body: Buffer.concat(parts), complete: false };
    }
    parts.push(data.subarray(lineEnd + 2, lineEnd + 2 + size));
    at = lineEnd + 2 + size + 2;
  }
}

/**
 * Sends one request on a fresh loopback connection and reads the first final answer (1xx other than
 * 101 skipped). Never throws: a reset, a close or silence is reported in `outcome`.
 */
export function sendRaw(port: number, request: RawRequest | Buffer, options: RawOptions, headOnly = false): Promise<RawResponse> {
  const bytes = Buffer.isBuffer(request) ? request : encodeRequest(request);
  const halfClose = !Buffer.isBuffer(request) && request.halfClose === true;
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    let data = Buffer.alloc(0);
    let head: Head | undefined;
    let settled = false;
    let streamTimer: NodeJS.Timeout | undefined;
    const finish = (result: Omit<RawResponse, 'status' | 'headers' | 'body'> & Partial<RawResponse>): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      clearTimeout(streamTimer);
      socket.destroy();
      resolve({ status: 0, headers: {}, body: Buffer.alloc(0), ...result });
    };
    const answer = (body: Buffer, extra: { cutShort?: boolean; bodyTimedOut?: boolean } = {}): void =>
      finish({ outcome: 'response', status: head!.status, headers: head!.headers, body, cutShort: extra.cutShort ?? false, bodyTimedOut: extra.bodyTimedOut ?? false });
    const timer = setTimeout(() => {
      if (head === undefined) finish({ outcome: 'timeout', cutShort: false, bodyTimedOut: false });
      else answer(data.subarray(head.bodyStart), { bodyTimedOut: true });
    }, options.timeoutMs);

    const check = (ended: boolean): void => {
      if (head === undefined) {
        const parsed = parseHead(data);
        if (parsed === undefined) return;
        if (parsed.status >= 100 && parsed.status < 200 && parsed.status !== 101) {
          data = data.subarray(parsed.bodyStart);
          check(ended);
          return;
        }
        head = parsed;
      }
      const rest = data.subarray(head.bodyStart);
      const noBody = headOnly || head.status === 101 || head.status === 204 || head.status === 304;
      if (noBody) return answer(Buffer.alloc(0));
      const length = head.headers['content-length']?.[0];
      if (length !== undefined) {
        if (rest.length >= Number(length)) return answer(rest.subarray(0, Number(length)));
      } else if ((head.headers['transfer-encoding']?.[0] ?? '').toLowerCase().includes('chunked')) {
        const decoded = dechunk(rest);
        if (decoded.complete) return answer(decoded.body);
        if (ended) return answer(decoded.body);
        streamTimer ??= setTimeout(() => answer(dechunk(data.subarray(head!.bodyStart)).body, { cutShort: true }), options.streamCutMs);
        return;
      }
      if (ended) return answer(rest);
      streamTimer ??= setTimeout(() => answer(data.subarray(head!.bodyStart), { cutShort: true }), options.streamCutMs);
    };

    socket.on('connect', () => {
      socket.write(bytes);
      if (halfClose) socket.end();
    });
    socket.on('data', (chunk: Buffer) => {
      data = Buffer.concat([data, chunk]);
      check(false);
    });
    socket.on('end', () => {
      check(true);
      if (head === undefined) finish({ outcome: 'closed', cutShort: false, bodyTimedOut: false });
    });
    socket.on('error', () => {
      if (head !== undefined) check(true);
      finish({ outcome: 'closed', cutShort: false, bodyTimedOut: false });
    });
    socket.on('close', () => {
      if (head !== undefined) check(true);
      finish({ outcome: 'closed', cutShort: false, bodyTimedOut: false });
    });
  });
}
