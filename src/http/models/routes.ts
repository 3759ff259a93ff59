// Public catalog routes: GET /v1/models and GET /v1/models/{id} (bare slug or svc/ prefix). With an
// anthropic-version header they answer as Anthropic's Models API does (anthropic.ts).
import { Elysia } from 'elysia'
import { bareModelId } from '../../catalog/entry.ts'
import type { CatalogStore } from '../../catalog/store.ts'
import { notFound } from '../../errors.ts'
import { ANTHROPIC_VERSION, anthropicList, anthropicModel } from './anthropic.ts'

export function modelRoutes(catalog: CatalogStore) {
  return new Elysia({ name: 'svc/models', prefix: '/v1/models' })
    .get('/', async ({ request }) => {
      const entries = await catalog.all()
      if (request.headers.has(ANTHROPIC_VERSION)) return anthropicList(entries, request.url)
      return { object: 'list' as const, data: [...entries.values()].map((e) => e.row) }
    })
    .get('/*', async ({ params, request }) => {
      let id: string
      try {
        id = decodeURIComponent(params['*'])
      } catch {
        throw notFound('model not found', 'model_not_found')
      }
      if (request.headers.has(ANTHROPIC_VERSION)) return anthropicModel(await catalog.all(), id)
      const entry = await catalog.get(id)
      if (!entry) throw notFound(`model '${bareModelId(id)}' not found`, 'model_not_found')
      return entry.row
    })
}
