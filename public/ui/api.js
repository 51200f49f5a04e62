// The public API from the browser (same origin): the session is an HttpOnly cookie shared by every tab (the script never sees it); changes carry the session's CSRF token; errors carry the API's message.
const BASE = '/api/v1';

/** The CSRF token of the cookie's session (GET /auth/session gives it to a new tab); null when signed out. */
let csrf = null;
let onUnauthorized = () => {};

/** An API failure: `message` is the API's own message. */
export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export const session = {
  /** Whether this tab holds a session (the cookie may still have ended elsewhere: a 401 says so). */
  get active() { return csrf !== null; },
  set(csrfToken) { csrf = csrfToken; },
  clear() { csrf = null; },
  /** Called when the API answers 401: the session ended elsewhere (logout in another tab, password change). */
  onUnauthorized(fn) { onUnauthorized = fn; },
};

const unsafe = (method) => !['GET', 'HEAD', 'OPTIONS'].includes(method);

async function failure(res) {
  let body;
  try { body = await res.json(); } catch { body = undefined; }
  const message = body && typeof body.message === 'string' ? body.message : `the server answered HTTP ${res.status}`;
  return new ApiError(res.status, body && body.error, message);
}

/** A request to a full URL of this origin; resolves with `{data, res}` or throws ApiError. */
export async function send(method, url, body, options = {}) {
  const headers = {};
  if (csrf && unsafe(method)) headers['x-csrf-token'] = csrf;
  if (body !== undefined) headers['content-type'] = 'application/json';
  let res;
  // A read is tried again after a dropped connection (a network change, a server restart); a
  // change is not, as it may have been applied.
  for (let attempt = 1; ; attempt += 1) {
    try {
      res = await fetch(url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), signal: options.signal });
      break;
    } catch (err) {
      if (err.name === 'AbortError') throw err;
      if (method !== 'GET' || attempt >= 3) throw new ApiError(0, 'network', 'the server cannot be reached; check your connection');
      await new Promise((resolve) => setTimeout(resolve, 250 * attempt));
    }
  }
  if (res.status === 401 && csrf && !options.noLogout) {
    const err = await failure(res);
    onUnauthorized(err.message);
    throw err;
  }
  if (!res.ok) throw await failure(res);
  if (res.status === 204) return { data: null, res };
  const type = res.headers.get('content-type') || '';
  const data = type.includes('json') ? await res.json() : await res.text();
  return { data, res };
}

/** A request to an API path (`/deployments`); resolves with the body. */
export async function call(method, path, body, options) {
  return (await send(method, BASE + path, body, options)).data;
}

/** A whole list: the API answers a page at a time and links the next one (`Link: <…>; rel="next"`). */
export async function callAll(path, options) {
  const items = [];
  for (let url = BASE + path; url;) {
    const { data, res } = await send('GET', url, undefined, options);
    items.push(...data);
    const next = /<([^>]*)>\s*;\s*rel="next"/.exec(res.headers.get('link') || '');
    url = next ? new URL(next[1], location.href).href : null;
  }
  return items;
}

/**
 * Streams a text endpoint (a log with `follow=true`), calling `onText` with each decoded piece as it
 * arrives. Resolves when the server ends the response; rejects with ApiError on an error status.
 */
export async function streamText(path, onText, signal) {
  const res = await fetch(BASE + path, { signal });
  if (res.status === 401) { const err = await failure(res); onUnauthorized(err.message); throw err; }
  if (!res.ok) throw await failure(res);
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    onText(value);
  }
}

/**
 * Uploads a tar.gz Blob as a deployment's source (multipart part `archive`), reporting progress as
 * `onProgress(sentBytes, totalBytes)`. fetch() cannot report upload progress; XMLHttpRequest can.
 */
export function uploadArchive(deploymentId, blob, onProgress, signal) {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open('POST', `${BASE}/deployments/${encodeURIComponent(deploymentId)}/upload`);
    if (csrf) xhr.setRequestHeader('x-csrf-token', csrf);
    xhr.responseType = 'json';
    xhr.upload.addEventListener('progress', (e) => { if (e.lengthComputable) onProgress(e.loaded, e.total); });
    xhr.addEventListener('load', () => {
      const body = xhr.response;
      if (xhr.status >= 200 && xhr.status < 300) return resolve(body);
      if (xhr.status === 401) onUnauthorized('your session has ended: log in again');
      reject(new ApiError(xhr.status, body && body.error, body && body.message ? body.message : `the server answered HTTP ${xhr.status}`));
    });
    xhr.addEventListener('error', () => reject(new ApiError(0, 'network', 'the upload was interrupted; check your connection')));
    xhr.addEventListener('abort', () => reject(new DOMException('upload aborted', 'AbortError')));
    signal?.addEventListener('abort', () => xhr.abort(), { once: true });
    const form = new FormData();
    form.append('archive', blob, 'source.tar.gz');
    xhr.send(form);
  });
}
