// The contract's error shape, in one place: {"error": {"message", "type", "code", ...extra}}.
// Routes and services throw ApiError; the app's onError turns it (and Elysia's own errors) into
// a response. A 500 never carries a stack trace.

export type ErrorType =
  | 'invalid_request_error'
  | 'authentication_error'
  | 'permission_error'
  | 'not_found_error'
  | 'insufficient_balance'
  | 'rate_limit_error'
  | 'api_error'
  | 'provider_error'
  | 'capacity_error'

const TYPE_BY_STATUS: Record<number, ErrorType> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  402: 'insufficient_balance',
  403: 'permission_error',
  404: 'not_found_error',
  405: 'invalid_request_error',
  409: 'invalid_request_error',
  413: 'invalid_request_error',
  429: 'rate_limit_error',
  502: 'provider_error',
  503: 'capacity_error',
}

export interface ApiErrorOptions {
  extra?: Record<string, unknown>
  headers?: Record<string, string>
  type?: ErrorType
}

export class ApiError extends Error {
  readonly type: ErrorType
  readonly extra: Record<string, unknown>
  readonly headers: Record<string, string>

  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    options: ApiErrorOptions = {},
  ) {
    super(message)
    this.type = options.type ?? TYPE_BY_STATUS[status] ?? 'api_error'
    this.extra = options.extra ?? {}
    this.headers = options.headers ?? {}
  }

  body() {
    return { error: { message: this.message, type: this.type, code: this.code, ...this.extra } }
  }
}

export const badRequest = (message: string, code = 'invalid_request') => new ApiError(400, code, message)
export const notFound = (message: string, code = 'not_found') => new ApiError(404, code, message)

export function errorResponse(error: ApiError, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(error.body()), {
    status: error.status,
    headers: { 'content-type': 'application/json', ...headers, ...error.headers },
  })
}
