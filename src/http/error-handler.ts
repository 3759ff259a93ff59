// Every error leaves the gateway in the contract's shape. Elysia's own errors (validation, parse,
// unknown route) become 4xx; anything unexpected becomes a bare 500 with no internals in it.
import { Elysia } from 'elysia'
import { ApiError } from '../errors.ts'
import { isRedisUnavailable } from '../redis/connection.ts'
import { errorResponse } from './errors.ts'
import { requestContext, requestIdHeaders } from './request-context.ts'

function validationMessage(error: unknown): string {
  const detail = error as {
    type?: string
    customError?: unknown
    valueError?: { path?: string; message?: string; value?: unknown }
  }
  const first = detail.valueError
  if (first?.message) {
    const field = first.path ? first.path.replace(/^\//, '').replaceAll('/', '.') : ''
    // A schema's own rule (its `error`) says it in words; TypeBox's message would quote its pattern.
    if (field && typeof detail.customError === 'string' && typeof first.value === 'string')
      return `invalid value at ${field}: ${detail.customError}`
    // Name the field a client forgot, and say plainly when there was no usable body at all.
    if (!field && detail.type === 'body') return `request body must be a JSON object (${first.message})`
    if (!field) return `invalid ${detail.type ?? 'request'}: ${first.message}`
    if (first.value === undefined) return `missing required field: ${field}`
    return `invalid value at ${field}: ${first.message}`
  }
  return 'request failed validation'
}

// Nothing was read or written: a clean, fast answer the client can retry.
const storeUnavailable = () =>
  new ApiError(503, 'store_unavailable', 'the gateway cannot reach its store right now; retry shortly', {
    headers: { 'retry-after': '1' },
  })

export function toApiError(code: string | number, error: unknown): ApiError {
  if (error instanceof ApiError) return error
  switch (code) {
    case 'VALIDATION':
      return new ApiError(400, 'invalid_request', validationMessage(error))
    case 'PARSE': {
      // Elysia wraps whatever a parse hook throws; auth reads Redis there, so look inside.
      const cause = (error as { cause?: unknown })?.cause
      if (cause instanceof ApiError) return cause
      if (isRedisUnavailable(cause)) return storeUnavailable()
      return new ApiError(400, 'invalid_json', 'request body is not valid JSON')
    }
    case 'NOT_FOUND':
      return new ApiError(404, 'not_found', 'no such route')
    default: {
      const status = (error as { status?: unknown })?.status
      if (typeof status === 'number' && status >= 400 && status < 500) {
        return new ApiError(
          status,
          'invalid_request',
          status === 413 ? 'request body too large' : 'bad request',
        )
      }
      if (isRedisUnavailable(error)) return storeUnavailable()
      return new ApiError(500, 'internal_error', 'internal error; safe to retry')
    }
  }
}

export const errorHandler = new Elysia({ name: 'svc/error-handler' }).onError(
  { as: 'global' },
  ({ code, error, request, set }) => {
    const apiError = toApiError(code, error)
    if (apiError.status >= 500) (request as Request & { failure?: unknown }).failure = error
    // The log line and the metrics read the status from here.
    set.status = apiError.status
    return errorResponse(apiError, requestIdHeaders(requestContext(request).id), request)
  },
)
