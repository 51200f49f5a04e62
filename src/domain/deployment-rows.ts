// The deployment and build records as the domain knows them (src/db/schema.ts stores them as they are).

export interface DeploymentRow {
  id: string;
  user_id: string;
  name: string;
  subdomain: string;
  source_type: 'git' | 'archive';
  repo_url: string | null;
  branch: string | null;
  dockerfile_path: string;
  /** The compose file's path in the source (contract §21); null: the deployment builds its Dockerfile. */
  compose_path?: string | null;
  status: 'pending' | 'building' | 'running' | 'stopped' | 'failed';
  /** Directory name (under uploads/<deployment>) of the current validated upload, if any. */
  upload_id: string | null;
  upload_size: number | null;
  upload_sha256: string | null;
  /** The build whose container serves traffic (or served it last, when stopped). */
  live_build_id: string | null;
  health_check_path: string | null;
  memory_bytes: number | null;
  nano_cpus: number | null;
  /** JSON `[{name, mount_path}]`: the deployment's named volumes. */
  volumes: string;
  /** Containers (docker) or tasks (swarm) a release runs, 1–20. */
  replicas: number;
  /** 1: a verified push to the tracked branch deploys (git deployments only). */
  auto_deploy: number;
  /** 1: pull requests against the tracked branch get preview deployments (git deployments only). */
  previews: number;
  /** A preview's deployment (null for a deployment of its own); see migration 2026-11-27-040. */
  parent_id: string | null;
  /** A preview's pull request number. */
  pr_number: number | null;
  /** The head commit a preview shows (its newest pull request event's). */
  pr_head_sha: string | null;
  /** The pull request's head repository as the forge names it. */
  pr_head_repo: string | null;
  /** 1: the head repository is the deployment's own (secrets reach the preview). */
  pr_same_repo: number;
  /** JSON array of the configuration keys changed since the live release (variable names, `volumes`…); null: none. */
  config_pending: string | null;
  /** The team the deployment belongs to; null: its creator's alone. */
  team_id: string | null;
  created_at: string;
  updated_at: string;
  /** Creation order (assigned by the store): the key of keyset pages. */
  seq: number;
}

/** A build as the lifecycle and the API see it (which instance runs it is the store's business). */
export interface BuildRow {
  id: string;
  deployment_id: string;
  status: 'building' | 'succeeded' | 'failed' | 'cancelled';
  commit_sha: string;
  /** git: the branch resolved; archive: the upload id snapshotted at trigger time. */
  source_ref: string;
  error: string | null;
  image_id: string | null;
  /** JSON of the set of services the build releases (src/runtime/release-set.ts); null: a single image. */
  release_set?: string | null;
  /** The release the build runs as now (the runtime's id for it), null when none. */
  container_id: string | null;
  /** JSON `[{host, port}]`: where the release's replicas serve HTTP (null with no release). */
  upstreams: string | null;
  started_at: string;
  finished_at: string | null;
  /** Creation order (assigned by the store). */
  seq: number;
}
