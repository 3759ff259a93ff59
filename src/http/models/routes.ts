// Public catalog routes: GET /v1/models and GET /v1/models/{id} (bare slug or svc/ prefix).
import { Elysia } from 'elysia'
import { bareModelId } from '../../catalog/entry.ts'
import type { CatalogStore } from '../../catalog/store.ts'
import { notFound } from '../../errors.ts'

export function modelRoutes(catalog: CatalogStore) {
  return new Elysia({ name: 'svc/models', prefix: '/v1/models' })
    .get('/', async () => {
      const entries = await catalog.all()
      return { object: 'list' as const, data: [...entries.values()].map((e) => e.row) }
    })
    .get('/*', async ({ params }) => {
      let id: string
      try {
        id = decodeURIComponent(params['*'])
      } catch {
        throw notFound('model not found', 'model_not_found')
      }
      const entry = await catalog.get(id)
      if (!entry) throw notFound(`model '${bareModelId(id)}' not found`, 'model_not_found')
      return entry.row
    })
}
