// Route: GET /limits — the installation's upload limits, so clients refuse an oversize source before they send it.
import type { FastifyPluginAsync } from 'fastify';
import { Type } from '@sinclair/typebox';
import { UPLOAD_LIMIT_SETTING } from '../../core/upload-limit.js';
import type { ApiDeps } from '../api-deps.js';
import { errorResponses } from '../schemas.js';

const LimitsResponse = Type.Object({
  max_upload_bytes: Type.Integer({ description: 'the largest archive (tar.gz) one upload may send' }),
  max_upload_setting: Type.Literal(UPLOAD_LIMIT_SETTING, { description: 'the server setting that raises it' }),
  max_expanded_bytes: Type.Integer({ description: "the most an archive's files may hold once extracted" }),
  max_archive_entries: Type.Integer({ description: 'the most entries an archive may hold' }),
});

export const limitRoutes =
  (deps: ApiDeps): FastifyPluginAsync =>
  async (app) => {
    app.get(
      '/limits',
      {
        schema: {
          tags: ['deployments'],
          summary: "The installation's upload limits (the upload_bytes quota is at /users/me/quotas)",
          response: { 200: LimitsResponse, ...errorResponses(401) },
        },
      },
      async () => ({
        max_upload_bytes: deps.config.maxUploadBytes,
        max_upload_setting: UPLOAD_LIMIT_SETTING,
        max_expanded_bytes: deps.config.maxExpandedBytes,
        max_archive_entries: deps.config.maxArchiveEntries,
      }),
    );
  };
