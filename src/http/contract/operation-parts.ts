// The pieces every operations table is built of: an operation's shape, its security, and the
// helpers for a success response and a query or path parameter.
import { type ErrorResponseName, headers } from './components.ts'

export type Security =
  | 'none'
  | 'apiKey'
  | 'adminToken'
  | 'x402'
  | 'apiKey+x402'
  | 'supplierKey'
  | 'apiKey|supplierKey'
  | 'apiKey|anthropicKey'

export interface Operation {
  summary: string
  tags: string[]
  security: Security
  description?: string
  parameters?: Record<string, unknown>[]
  ok?: Record<string, unknown>
  errors: ErrorResponseName[]
}

export const ok = (description: string, status = '200', extra: Record<string, unknown> = {}) => ({
  [status]: { description, headers: headers(), ...extra },
})

export const query = (name: string, description: string, schema: Record<string, unknown>) => ({
  name,
  in: 'query',
  required: false,
  description,
  schema,
})

export const path = (name: string, description: string) => ({
  name,
  in: 'path',
  required: true,
  description,
  schema: { type: 'string' },
})

/** The limit and before of a Stream-backed list (activity, fills). */
export const PAGE_PARAMETERS = [
  query('limit', 'items per page, 1 to 200 (default 50)', { type: 'integer', minimum: 1, maximum: 200 }),
  query('before', 'the nextCursor of the previous page', { type: 'string' }),
]

/** The window of a summary by UTC day. */
export const WINDOW_PARAMETERS = [
  query('window', '24h, 7d (default) or 30d', { type: 'string', enum: ['24h', '7d', '30d'] }),
]

/** The Idempotency-Key header of a request that moves money: 1 to 255 visible ASCII characters. */
export const idempotencyKey = (required: boolean, description: string) => ({
  name: 'Idempotency-Key',
  in: 'header',
  required,
  description,
  schema: { type: 'string', minLength: 1, maxLength: 255 },
})
