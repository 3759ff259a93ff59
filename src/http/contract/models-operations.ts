// The public catalog (/v1/models) for the OpenAPI document; merged into OPERATIONS (operations.ts).
// Asked with anthropic-version it is Anthropic's Models API, whose refusals are Anthropic's shape.
import { headers } from './components.ts'
import { type Operation, ok, path, query } from './operation-parts.ts'

const ANTHROPIC_VERSION = {
  name: 'anthropic-version',
  in: 'header',
  required: false,
  description:
    "Anthropic's API version, as its clients send it (any value): the answer is then Anthropic's Models API shape, errors included",
  schema: { type: 'string' },
}

const json = (...schemas: string[]) => ({
  'application/json': {
    schema:
      schemas.length === 1
        ? { $ref: `#/components/schemas/${schemas[0]}` }
        : { oneOf: schemas.map((name) => ({ $ref: `#/components/schemas/${name}` })) },
  },
})

const ANTHROPIC_ITEM =
  'an Anthropic item is {type: "model", id (the bare slug /v1/messages takes), display_name (the catalog name), created_at (RFC 3339), max_input_tokens, max_tokens, lifecycle "active", capabilities, line, deprecated_at and retires_at null}'

export const MODELS_OPERATIONS: Record<string, Operation> = {
  'GET /v1/models': {
    summary: 'The model catalog',
    description: `Without anthropic-version: {object: "list", data: [catalog rows]}, the whole catalog. With it: Anthropic's list of the models /v1/messages serves (live text models), newest first (one date by id), a page {data, has_more, first_id, last_id}; ${ANTHROPIC_ITEM}. No key needed either way.`,
    tags: ['public'],
    security: 'none',
    parameters: [
      ANTHROPIC_VERSION,
      query('limit', 'with anthropic-version: items per page, 1 to 1000 (default 20)', {
        type: 'integer',
        minimum: 1,
        maximum: 1000,
      }),
      query('after_id', 'with anthropic-version: the page just after this model (a last_id)', {
        type: 'string',
      }),
      query('before_id', 'with anthropic-version: the page just before this model (a first_id)', {
        type: 'string',
      }),
      query('lifecycle[]', 'with anthropic-version: active, deprecated or retired; every model is active', {
        type: 'array',
        items: { type: 'string', enum: ['active', 'deprecated', 'retired'] },
      }),
    ],
    ok: {
      ...ok('The catalog, or one page of it in Anthropic shape'),
      '400': {
        description:
          'Only with anthropic-version, invalid_request_error: invalid_limit (not 1 to 1000), invalid_cursor (before_id or after_id names no listed model, or both sent), invalid_lifecycle; nothing read or written',
        headers: headers(),
        content: json('MessagesError'),
      },
    },
    errors: [],
  },
  'GET /v1/models/{id}': {
    summary: 'One catalog row (bare slug or svc/ prefix; the answer carries the bare slug)',
    description: `With anthropic-version, Anthropic's model info instead: ${ANTHROPIC_ITEM}; a model /v1/messages would not serve (image, video, not live) is then not found.`,
    tags: ['public'],
    security: 'none',
    parameters: [
      ANTHROPIC_VERSION,
      path('id', 'a catalog slug, bare or svc/<slug> (the slash may be sent as is)'),
    ],
    ok: {
      ...ok('The row, or the Anthropic model info'),
      '404': {
        description:
          'model_not_found: not on the list (offline, disabled, unknown); in Anthropic shape (not_found_error) with anthropic-version',
        headers: headers(),
        content: json('Error', 'MessagesError'),
      },
    },
    errors: [],
  },
}
