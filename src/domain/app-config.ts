// App configuration use-cases: a deployment's environment variables (validated, secrets write-only).
import { deploymentRecord, type AuditRecord } from './audit.js';
import { DomainError } from '../core/errors.js';
import type { Principal } from '../core/principal.js';
import type { DeploymentCatalog } from './deployment-catalog.js';
import { getDeploymentRow } from './deployments.js';
import { STACK_NAMES, STACK_VARIABLE } from '../stacks/detect-stack.js';

/** One variable as the use-cases and stores see it (plain text: encryption is the store's job). */
export interface EnvVar {
  readonly key: string;
  readonly value: string;
  readonly secret: boolean;
  readonly updated_at: string;
}

/** A change of several variables, applied all or nothing. */
export interface EnvChange {
  /** Keys to set, with their new values. */
  readonly set: ReadonlyMap<string, string>;
  /** Keys to remove (absent ones are ignored). */
  readonly unset: readonly string[];
  /** The secret flag every key in `set` gets. */
  readonly secret: boolean;
}

/**
 * Where configuration lives (implemented in src/db/, which encrypts every value at rest). Lists
 * are sorted by key.
 */
export interface AppConfigStore {
  /** The deployment's current variables. */
  current(deploymentId: string): Promise<EnvVar[]>;
  /**
   * Applies `change` in one transaction. `check` sees the resulting variables before the commit and
   * throws to abort it (limits that depend on what is already stored).
   */
  change(deploymentId: string, change: EnvChange, check: (result: readonly EnvVar[]) => void, audit?: AuditRecord): Promise<EnvVar[]>;
  /** Records the deployment's current variables as the configuration `buildId` is released with. */
  recordForBuild(deploymentId: string, buildId: string): Promise<EnvVar[]>;
  /** Records `vars` as the configuration `buildId` was (re-)released with. */
  setBuildConfig(buildId: string, vars: readonly EnvVar[], audit?: AuditRecord): Promise<void>;
  /** The configuration `buildId` was released with; undefined for a build made before configuration existed. */
  buildConfig(buildId: string): Promise<EnvVar[] | undefined>;
  /** Makes `vars` the deployment's current variables (rollback). */
  replace(deploymentId: string, vars: readonly EnvVar[], audit?: AuditRecord): Promise<void>;
}

/** Limits of decisions §9. */
export const ENV_LIMITS = {
  keyLength: 256,
  valueBytes: 32 * 1024,
  count: 500,
  totalBytes: 256 * 1024,
} as const;

const KEY_PATTERN = /^[A-Za-z_][A-Za-z0-9_]*$/;

const invalid = (message: string): DomainError => new DomainError('validation_error', message);
/** A key as it may safely appear in a message (it came from the request). */
const quoted = (key: string): string => JSON.stringify(key.length > 80 ? `${key.slice(0, 80)}…` : key);

/** Checks a variable name; throws validation_error naming it. */
export function checkEnvKey(key: string): void {
  if (key.length > ENV_LIMITS.keyLength) throw invalid(`variable ${quoted(key)}: a name is at most ${ENV_LIMITS.keyLength} characters`);
  if (!KEY_PATTERN.test(key)) {
    throw invalid(`variable ${quoted(key)}: a name is letters, digits and "_", not starting with a digit`);
  }
  if (key === 'PORT') throw invalid('variable "PORT" is reserved: Slipway sets it to the port the app must listen on');
  if (key.startsWith('SLIPWAY_')) throw invalid(`variable ${quoted(key)}: names starting with SLIPWAY_ are reserved`);
}

/** Checks a value; throws validation_error naming its key. */
export function checkEnvValue(key: string, value: string): void {
  if (value.includes('\0')) throw invalid(`variable ${quoted(key)}: a value cannot contain a NUL character`);
  if (Buffer.byteLength(value, 'utf8') > ENV_LIMITS.valueBytes) {
    throw invalid(`variable ${quoted(key)}: a value is at most ${ENV_LIMITS.valueBytes} bytes`);
  }
}

/**
 * SLIPWAY_STACK, the one SLIPWAY_ name a user sets: builds without a Dockerfile read it to pick a
 * stack when several match (decisions §24), so it names one, and is plain (builds see no secret).
 */
function checkStackVariable(value: string, secret: boolean): void {
  if (!(STACK_NAMES as readonly string[]).includes(value)) {
    throw invalid(`variable "${STACK_VARIABLE}" picks the stack of a build without a Dockerfile: one of ${STACK_NAMES.join(', ')}, not ${quoted(value)}`);
  }
  if (secret) throw invalid(`variable "${STACK_VARIABLE}" is read by the build, which sees no secret: set it as a plain variable`);
}

/** Checks the per-deployment limits on the variables a change would leave. */
export function checkEnvTotals(result: readonly EnvVar[], changedKeys: readonly string[]): void {
  const named = changedKeys.length === 0 ? '' : ` (setting ${changedKeys.slice(0, 3).map(quoted).join(', ')}${changedKeys.length > 3 ? ', …' : ''})`;
  if (result.length > ENV_LIMITS.count) {
    throw invalid(`too many variables${named}: at most ${ENV_LIMITS.count} per deployment, this would make ${result.length}`);
  }
  const total = result.reduce((sum, v) => sum + Buffer.byteLength(v.key, 'utf8') + Buffer.byteLength(v.value, 'utf8'), 0);
  if (total > ENV_LIMITS.totalBytes) {
    throw invalid(`variables too large${named}: names and values total at most ${ENV_LIMITS.totalBytes} bytes per deployment, this would make ${total}`);
  }
}

/** The body of `PATCH /deployments/{id}/env`. */
export interface PatchEnvInput {
  vars: Record<string, string | null>;
  secret?: boolean | undefined;
}

/** Validates a PATCH body into a change; throws validation_error naming the first bad key. */
export function parseEnvChange(input: PatchEnvInput): EnvChange {
  const entries = Object.entries(input.vars);
  if (entries.length === 0) throw invalid('vars is empty: name at least one variable to set (a string) or remove (null)');
  if (entries.length > ENV_LIMITS.count) throw invalid(`too many variables in one change: at most ${ENV_LIMITS.count}`);
  const set = new Map<string, string>();
  const unset: string[] = [];
  for (const [key, value] of entries) {
    if (key !== STACK_VARIABLE) checkEnvKey(key);
    if (value === null) {
      unset.push(key);
    } else if (typeof value === 'string') {
      checkEnvValue(key, value);
      if (key === STACK_VARIABLE) checkStackVariable(value, input.secret === true);
      set.set(key, value);
    } else {
      throw invalid(`variable ${quoted(key)}: a value is a string, or null to remove it`);
    }
  }
  return { set, unset, secret: input.secret ?? false };
}

/** One variable as the API shows it: a secret's value is never shown. */
export interface EnvVarView {
  key: string;
  value: string | null;
  secret: boolean;
  updated_at: string;
}

/** `{vars}` sorted by key, secrets' values null (decisions §9). */
export function presentEnv(vars: readonly EnvVar[]): { vars: EnvVarView[] } {
  return {
    vars: [...vars]
      .sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0))
      .map((v) => ({ key: v.key, value: v.secret ? null : v.value, secret: v.secret, updated_at: v.updated_at })),
  };
}

export interface AppConfigDeps {
  readonly deployments: DeploymentCatalog;
  readonly configs: AppConfigStore;
}

/** The caller's deployment's variables (another user's deployment is not_found). */
export async function getEnv(deps: AppConfigDeps, principal: Principal, deploymentId: string): Promise<{ vars: EnvVarView[] }> {
  const dep = await getDeploymentRow(deps.deployments, principal, deploymentId, 'read');
  return presentEnv(await deps.configs.current(dep.id));
}

/** Sets and removes variables at once; they apply at the next deploy, restart or rollback. */
export async function patchEnv(
  deps: AppConfigDeps,
  principal: Principal,
  deploymentId: string,
  input: PatchEnvInput,
): Promise<{ vars: EnvVarView[] }> {
  const dep = await getDeploymentRow(deps.deployments, principal, deploymentId, 'change');
  const change = parseEnvChange(input);
  // The entry names the deployment only: never a value (nor, in the log's fixed fields, a key).
  const result = await deps.configs.change(dep.id, change, (vars) => checkEnvTotals(vars, [...change.set.keys()]), deploymentRecord(principal, dep, 'env.update'));
  // The running app keeps the old values until its next release: every view says which changed.
  await deps.deployments.markConfigPending(dep.id, [...change.set.keys(), ...change.unset]);
  return presentEnv(result);
}
