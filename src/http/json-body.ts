// Request bodies are JSON objects sent as application/json. Anything else is a 400 that says so,
// before validation sees it: a form post or text body must not slip through as a string or a
// coerced object, and a parse failure must never become a 500.
import { ApiError, badRequest } from '../errors.ts'
import { readCapped } from '../read-capped.ts'

const JSON_TYPE = /^application\/(?:[\w.+-]+\+)?json$/i

export const bodyTooLarge = (maxBytes: number) =>
  new ApiError(413, 'body_too_large', `request body over ${maxBytes} bytes`)

// Each request's body bound, set by the app as the request arrives (SVC_MAX_BODY_BYTES).
const bounds = new WeakMap<Request, number>()

/**
 * Bounds what jsonBody reads of this request's body: a declared length past the bound is refused
 * (throws the 413) before a byte is read; a body without one is refused while it is read.
 */
export function boundBody(request: Request, maxBytes: number): void {
  if (Number(request.headers.get('content-length') ?? 0) > maxBytes) throw bodyTooLarge(maxBytes)
  bounds.set(request, maxBytes)
}

/**
 * The body as text. A declared Content-Length was checked against the bound before any byte was
 * read; a body without one (chunked) is counted as it streams in and refused at the bound, so it
 * is never held whole.
 */
async function bodyText(request: Request): Promise<string> {
  const bound = bounds.get(request)
  const declared = request.headers.has('content-length') && !request.headers.has('transfer-encoding')
  if (bound === undefined || request.body === null || declared) return request.text()
  const bytes = await readCapped(request.body, bound, () => bodyTooLarge(bound))
  // As request.text() decodes: UTF-8, a byte-order mark dropped, bad bytes replaced.
  return new TextDecoder().decode(bytes)
}

/** An Elysia parse hook: the body as JSON, null when there is none, a 400 when it is not JSON. */
export async function jsonBody({ request }: { request: Request }): Promise<unknown> {
  const text = await bodyText(request)
  // No body: validation then answers "request body must be a JSON object" for routes that need one.
  if (text.trim() === '') return null
  const contentType = (request.headers.get('content-type') ?? '').split(';')[0]!.trim()
  if (!JSON_TYPE.test(contentType)) {
    throw badRequest(
      'request body must be JSON, sent with content-type: application/json',
      'invalid_content_type',
    )
  }
  let body: unknown
  try {
    body = JSON.parse(text)
  } catch {
    throw badRequest('request body is not valid JSON', 'invalid_json')
  }
  if (depthExceeds(body, MAX_JSON_DEPTH)) {
    throw badRequest(`request body nests deeper than ${MAX_JSON_DEPTH} levels`, 'json_too_deep')
  }
  return body
}

// No request of this API nests deeply; a body that does is an attack on whatever walks it later.
export const MAX_JSON_DEPTH = 64

function depthExceeds(value: unknown, limit: number): boolean {
  // Objects and their depths on two stacks: no pair made per node, no copy of an array's items.
  const nodes: unknown[] = [value]
  const depths: number[] = [1]
  while (nodes.length > 0) {
    const node = nodes.pop() as Record<string, unknown> | null
    const depth = depths.pop()!
    if (node === null || typeof node !== 'object') continue
    if (depth > limit) return true
    const children = Array.isArray(node) ? node : Object.values(node)
    for (let i = 0; i < children.length; i++) {
      const child = children[i]
      if (child !== null && typeof child === 'object') {
        nodes.push(child)
        depths.push(depth + 1)
      }
    }
  }
  return false
}
