// Test assertions shared by the API suites: the `{error, message}` shape of every failure, and leak checks.
import assert from 'node:assert/strict';
import type { HttpResult } from './server.js';

/** A stack frame as V8 prints it: "    at fn (file:line:col)". */
const STACK_FRAME = /\n\s+at [^\n]*[:(]/;

/** Asserts the response is the error `code` with `status`, with a body of exactly `{error, message}`. */
export function assertError(res: HttpResult, status: number, code: string, what = ''): void {
  const where = `${what}${what === '' ? '' : ': '}got ${res.status} ${res.text.slice(0, 300)}`;
  assert.equal(res.status, status, where);
  assert.match(res.headers.get('content-type') ?? '', /^application\/json/, where);
  assert.deepEqual(Object.keys(res.json as object).sort(), ['error', 'message'], where);
  assert.equal(res.json.error, code, where);
  assert.equal(typeof res.json.message, 'string', where);
  assert.ok((res.json.message as string).length > 0, where);
  assertNoLeak(res);
}

/** Asserts a response carries no stack trace and none of the given secrets. */
export function assertNoLeak(res: HttpResult, secrets: readonly string[] = []): void {
  assert.doesNotMatch(res.text, STACK_FRAME, 'a response carries a stack trace');
  for (const secret of secrets) assert.ok(!res.text.includes(secret), `a response carries a secret: ${res.text.slice(0, 200)}`);
}

/** Asserts the 401 every bad credential gets: one body for all, with `WWW-Authenticate: Bearer`. */
export function assertUnauthorized(res: HttpResult, what = ''): void {
  assertError(res, 401, 'unauthorized', what);
  assert.match(res.headers.get('www-authenticate') ?? '', /^Bearer\b/, what);
}
