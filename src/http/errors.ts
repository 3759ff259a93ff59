// An ApiError as an HTTP response: the one place the contract's error shape meets the wire. Under
// /v1/messages, and under /v1/models asked with anthropic-version, it is Anthropic's shape,
// {"type":"error","error":{"type","message",...}}, with the contract's code and extra fields
// (supportReference, hints) beside Anthropic's own, and the request's id as Anthropic gives it.
import type { ApiError } from '../errors.ts'
import { ANTHROPIC_VERSION } from './models/anthropic.ts'
import { requestContext } from './request-context.ts'
import { requestPath } from './request-url.ts'

/** Anthropic's error type for a status; 503 (no capacity now) is its overloaded_error. */
const ANTHROPIC_TYPE: Record<number, string> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  402: 'billing_error',
  403: 'permission_error',
  404: 'not_found_error',
  405: 'invalid_request_error',
  409: 'invalid_request_error',
  413: 'request_too_large',
  429: 'rate_limit_error',
  503: 'overloaded_error',
}

/** The error body in Anthropic's shape. */
export function anthropicErrorBody(error: ApiError, requestId: string) {
  const type = ANTHROPIC_TYPE[error.status] ?? (error.status < 500 ? 'invalid_request_error' : 'api_error')
  return { type: 'error', error: { ...error.body().error, type }, request_id: requestId }
}

function speaksAnthropic(request: Request): boolean {
  const pathname = requestPath(request)
  if (pathname === '/v1/messages' || pathname.startsWith('/v1/messages/')) return true
  const models = pathname === '/v1/models' || pathname.startsWith('/v1/models/')
  return models && request.headers.has(ANTHROPIC_VERSION)
}

export function errorResponse(
  error: ApiError,
  headers: Record<string, string> = {},
  request?: Request,
): Response {
  const anthropic = request !== undefined && speaksAnthropic(request)
  const body = anthropic ? anthropicErrorBody(error, requestContext(request).id) : error.body()
  return new Response(JSON.stringify(body), {
    status: error.status,
    headers: { 'content-type': 'application/json', ...headers, ...error.headers },
  })
}
