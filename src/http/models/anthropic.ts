// The catalog as Anthropic's Models API answers it, for clients that speak only Anthropic's API
// (its SDK sends anthropic-version on every call; OpenAI's clients never do). Listed are the models
// /v1/messages serves (live text models), newest first, ties by id, under the ids it accepts; a
// page is {data, has_more, first_id, last_id}, walked by after_id or, backwards, before_id.
import { bareModelId, type CatalogEntry } from '../../catalog/entry.ts'
import { badRequest, notFound } from '../../errors.ts'

export const ANTHROPIC_VERSION = 'anthropic-version'

/** Anthropic's ModelInfo; what the catalog cannot say (capabilities, line) is null. */
export interface AnthropicModel {
  type: 'model'
  id: string
  display_name: string
  /** RFC 3339; the epoch when the upstream gives no date, as Anthropic does. */
  created_at: string
  max_input_tokens: number | null
  max_tokens: number | null
  capabilities: null
  line: null
  lifecycle: 'active'
  deprecated_at: null
  retires_at: null
}

export interface AnthropicPage {
  data: AnthropicModel[]
  has_more: boolean
  first_id: string | null
  last_id: string | null
}

const DEFAULT_LIMIT = 20
const MAX_LIMIT = 1000
const LIFECYCLES = ['active', 'deprecated', 'retired']

interface View {
  models: AnthropicModel[]
  position: Map<string, number>
}

// Built once per catalog snapshot (the store hands out the same Map until it reloads).
const views = new WeakMap<Map<string, CatalogEntry>, View>()

const servedByMessages = ({ row, prices }: CatalogEntry) =>
  row.modality === 'text' && row.status === 'live' && prices !== null

// A date past what Date can hold (an upstream's odd `created`) is unknown: the epoch.
function rfc3339(seconds: number): string {
  const date = new Date(seconds * 1000)
  return (Number.isNaN(date.getTime()) ? new Date(0) : date).toISOString().replace('.000Z', 'Z')
}

function toAnthropic({ row }: CatalogEntry): AnthropicModel {
  return {
    type: 'model',
    id: row.id,
    display_name: row.name || row.id,
    created_at: rfc3339(row.created),
    max_input_tokens: row.context_length ?? null,
    max_tokens: row.max_completion_tokens ?? null,
    capabilities: null,
    line: null,
    lifecycle: 'active',
    deprecated_at: null,
    retires_at: null,
  }
}

function viewOf(entries: Map<string, CatalogEntry>): View {
  let view = views.get(entries)
  if (!view) {
    const served = [...entries.values()].filter(servedByMessages)
    served.sort((a, b) => b.row.created - a.row.created || (a.row.id < b.row.id ? -1 : 1))
    const models = served.map(toAnthropic)
    view = { models, position: new Map(models.map((m, i) => [m.id, i])) }
    views.set(entries, view)
  }
  return view
}

/** One model, by bare slug or `svc/` id; a model /v1/messages would refuse is not found here. */
export function anthropicModel(entries: Map<string, CatalogEntry>, requested: string): AnthropicModel {
  const id = bareModelId(requested)
  const view = viewOf(entries)
  const at = view.position.get(id)
  if (at !== undefined) return view.models[at]!
  const row = entries.get(id)?.row
  const why = !row
    ? 'not found'
    : row.modality !== 'text'
      ? `is a ${row.modality} model; /v1/messages serves text models`
      : 'is not live yet'
  throw notFound(`model '${id.slice(0, 200)}' ${why}; GET /v1/models lists the models`, 'model_not_found')
}

function cursorAt(view: View, name: string, value: string | null): number | undefined {
  if (value === null) return undefined
  const at = view.position.get(bareModelId(value))
  if (at === undefined) {
    throw badRequest(`${name} '${value.slice(0, 200)}' is no model on this list`, 'invalid_cursor')
  }
  return at
}

/** One page of the list, or the 400 that says what is wrong with the query. */
export function anthropicList(entries: Map<string, CatalogEntry>, url: string): AnthropicPage {
  const query = new URL(url).searchParams
  const limitText = query.get('limit') ?? String(DEFAULT_LIMIT)
  const limit = /^\d{1,4}$/.test(limitText) ? Number(limitText) : 0
  if (limit < 1 || limit > MAX_LIMIT) {
    throw badRequest(`limit must be an integer from 1 to ${MAX_LIMIT}`, 'invalid_limit')
  }
  // Anthropic's SDK sends a list as lifecycle[]=...; every model listed here is active.
  const lifecycle = [...query.getAll('lifecycle[]'), ...query.getAll('lifecycle')]
  const unknown = lifecycle.find((stage) => !LIFECYCLES.includes(stage))
  if (unknown !== undefined) {
    throw badRequest(`lifecycle must be among ${LIFECYCLES.join(', ')}`, 'invalid_lifecycle')
  }
  const beforeId = query.get('before_id')
  const afterId = query.get('after_id')
  if (beforeId !== null && afterId !== null) {
    throw badRequest('send before_id or after_id, not both', 'invalid_cursor')
  }
  const view = viewOf(entries)
  const before = cursorAt(view, 'before_id', beforeId)
  const after = cursorAt(view, 'after_id', afterId)
  const models = lifecycle.length === 0 || lifecycle.includes('active') ? view.models : []
  let start: number
  let end: number
  let hasMore: boolean
  if (before !== undefined) {
    end = Math.min(before, models.length)
    start = Math.max(0, end - limit)
    hasMore = start > 0
  } else {
    start = after === undefined ? 0 : after + 1
    end = Math.min(start + limit, models.length)
    hasMore = end < models.length
  }
  const data = models.slice(start, end)
  return { data, has_more: hasMore, first_id: data[0]?.id ?? null, last_id: data.at(-1)?.id ?? null }
}
