// The one check every inference route makes of the model it is asked for: on the list (else 404),
// of the route's modality, live and priced for what this route bills (else 400).
import type { CatalogEntry, Modality, ModelPrices } from '../catalog/entry.ts'
import { badRequest, notFound } from '../errors.ts'

export function callableModel<P extends keyof ModelPrices>(
  entry: CatalogEntry | undefined,
  requested: string,
  modality: Modality,
  priced: P[],
): CatalogEntry & { prices: Required<Pick<ModelPrices, P>> } {
  if (!entry)
    throw notFound(`model '${requested}' not found; GET /v1/models lists the catalog`, 'model_not_found')
  const { row, prices } = entry
  if (row.modality !== modality) {
    throw badRequest(
      `model '${row.id}' is a ${row.modality} model; this endpoint serves ${modality} models`,
      `model_not_${modality}`,
    )
  }
  if (row.status !== 'live' || !prices || priced.some((field) => prices[field] === undefined)) {
    throw badRequest(`model '${row.id}' is not live yet`, 'model_not_live')
  }
  return entry as CatalogEntry & { prices: Required<Pick<ModelPrices, P>> }
}
