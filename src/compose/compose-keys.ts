// Contract §21's lists: the compose keys Slipway applies, the ones it refuses, and (by elimination) the ones it ignores with a warning.

/** Service keys applied (each checked further where it can reach outside the deployment). */
export const SUPPORTED_SERVICE_KEYS: ReadonlySet<string> = new Set([
  'build',
  'image',
  'command',
  'entrypoint',
  'environment',
  'env_file',
  'depends_on',
  'healthcheck',
  'expose',
  'ports',
  'volumes',
  'deploy',
  'restart',
  'working_dir',
  'user',
  'secrets',
  'configs',
]);

/** Service keys that would give a container the host's privileges or namespaces: the build fails naming each. */
export const REFUSED_SERVICE_KEYS: ReadonlySet<string> = new Set([
  'privileged',
  'network_mode',
  'cap_add',
  'devices',
  'pid',
  'ipc',
  'userns_mode',
  'security_opt',
  'sysctls',
  'cgroup_parent',
]);

/** Top-level keys applied. */
export const SUPPORTED_TOP_KEYS: ReadonlySet<string> = new Set(['services', 'volumes', 'secrets', 'configs']);

/** `build` sub-keys applied. */
export const SUPPORTED_BUILD_KEYS: ReadonlySet<string> = new Set(['context', 'dockerfile', 'args', 'target']);

/** Most services one compose file may declare. */
export const MAX_SERVICES = 20;

/** `x-…` keys are the file's own extension fields: never warned about. */
export const isExtension = (key: string): boolean => key.startsWith('x-');
