// Per-request facts every layer needs (request id, start time), keyed by the Request itself so
// that error and log hooks can find them whatever path the request took.

export interface RequestContext {
  id: string
  startedAt: number
  /** Set by inference routes, for the request's log line. */
  supportReference?: string
  costUsdc?: string
}

const contexts = new WeakMap<Request, RequestContext>()

// 96 random bits, hex: unique enough to search logs by, short enough to read.
export function newRequestId(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(12))
  return `req_${Buffer.from(bytes).toString('hex')}`
}

export function beginRequest(request: Request): RequestContext {
  const context = { id: newRequestId(), startedAt: performance.now() }
  contexts.set(request, context)
  return context
}

export function requestContext(request: Request): RequestContext {
  return contexts.get(request) ?? beginRequest(request)
}

export const REQUEST_ID_HEADER = 'x-svc-request-id'
/** The same id under the name OpenAI's SDKs read (`_request_id`). */
export const OPENAI_REQUEST_ID_HEADER = 'x-request-id'
/** The same id under the name Anthropic's SDKs read (`_request_id`, APIError.requestID). */
export const ANTHROPIC_REQUEST_ID_HEADER = 'request-id'

/** Every request-id header, for every response. */
export const requestIdHeaders = (id: string): Record<string, string> => ({
  [REQUEST_ID_HEADER]: id,
  [OPENAI_REQUEST_ID_HEADER]: id,
  [ANTHROPIC_REQUEST_ID_HEADER]: id,
})
