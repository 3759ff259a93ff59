// The contract's error shape, in one place: {"error": {"message", "type", "code", ...extra}}.
// Services and routes throw ApiError; it sits below every service, so none of them knows HTTP.
// The app's onError (src/http/error-handler.ts) turns it into a response; a 500 never carries a
// stack trace.

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

/**
 * Told to clients that retry on their own (OpenAI's SDKs honour both): a refusal that waiting cannot
 * cure says so, one that a short wait may cure says how long.
 */
export const NO_RETRY = { 'x-should-retry': 'false' } as const
export const retryAfter = (seconds: number) => ({ 'retry-after': String(seconds) })

export const badRequest = (message: string, code = 'invalid_request') => new ApiError(400, code, message)
export const notFound = (message: string, code = 'not_found') => new ApiError(404, code, message)
