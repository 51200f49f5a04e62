// Shapes of the API's answers as the CLI reads them (docs: /api/v1/openapi.json).

export interface Deployment {
  id: string;
  name: string;
  subdomain: string;
  status: 'pending' | 'building' | 'running' | 'stopped' | 'failed';
  source_type: 'git' | 'archive';
  created_at: string;
  updated_at: string;
  repo_url?: string;
  branch?: string | null;
  dockerfile_path?: string;
  url?: string;
  live_build_id?: string | null;
}

export interface Build {
  id: string;
  deployment_id: string;
  status: 'building' | 'succeeded' | 'failed' | 'cancelled';
  commit_sha: string;
  started_at: string;
  finished_at: string | null;
  error?: string | null;
}

export interface User {
  id: string;
  email: string;
  created_at: string;
}

export interface ApiKey {
  id: string;
  name: string;
  key_prefix: string;
  created_at: string;
  last_used_at: string | null;
}

export interface LoginAnswer {
  token: string;
  expires_at: string;
  user: User;
}

export interface UploadAnswer {
  status: 'uploaded';
  size: number;
}

export interface MessageAnswer {
  message: string;
}
