// An ApiError as an HTTP response: the one place the contract's error shape meets the wire.
import type { ApiError } from '../errors.ts'

export function errorResponse(error: ApiError, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(error.body()), {
    status: error.status,
    headers: { 'content-type': 'application/json', ...headers, ...error.headers },
  })
}
