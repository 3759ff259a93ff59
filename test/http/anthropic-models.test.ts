// The Anthropic view of the catalog (src/http/models/anthropic.ts) on catalogs the simulated
// supplier does not publish: models of different dates, no name, a date past what Date holds.
import { describe, expect, test } from 'bun:test'
import type { CatalogEntry, CatalogRow } from '../../src/catalog/entry.ts'
import { anthropicList, anthropicModel } from '../../src/http/models/anthropic.ts'

const entry = (id: string, created: number, name = id): CatalogEntry => ({
  row: {
    id,
    object: 'model',
    created,
    owned_by: 'svc',
    name,
    status: 'live',
    modality: 'text',
    capabilities: {},
  } satisfies CatalogRow,
  prices: { inputPerMillion: 1, outputPerMillion: 1 },
})

const catalog = (...entries: CatalogEntry[]) => new Map(entries.map((e) => [e.row.id, e]))
const list = (entries: Map<string, CatalogEntry>, query = '') =>
  anthropicList(entries, `http://gateway.test/v1/models${query}`)

describe('the Anthropic list', () => {
  test('newest first as Anthropic lists, one date by id, and paged in that order', () => {
    const entries = catalog(
      entry('a-old', 1_600_000_000),
      entry('c-new', 1_700_000_000),
      entry('b-new', 1_700_000_000),
    )
    expect(list(entries).data.map((m) => m.id)).toEqual(['b-new', 'c-new', 'a-old'])
    expect(list(entries, '?after_id=c-new').data.map((m) => m.id)).toEqual(['a-old'])
    expect(list(entries, '?before_id=c-new').data.map((m) => m.id)).toEqual(['b-new'])
    expect(list(entries, '?limit=1000').has_more).toBe(false)
  })

  test('no name: the id is the display name; an unreadable date is the epoch', () => {
    const model = anthropicModel(catalog(entry('nameless', 9e15, '')), 'svc/nameless')
    expect(model.display_name).toBe('nameless')
    expect(model.created_at).toBe('1970-01-01T00:00:00Z')
    expect(model.max_tokens).toBeNull()
    expect(model.max_input_tokens).toBeNull()
  })
})
