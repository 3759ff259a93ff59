// Request bodies are JSON objects sent as application/json. Anything else is a 400 that says so,
// before validation sees it: a form post or text body must not slip through as a string or a
// coerced object, and a parse failure must never become a 500.
import { badRequest } from '../errors.ts'

const JSON_TYPE = /^application\/(?:[\w.+-]+\+)?json$/i

/** An Elysia parse hook: the body as JSON, null when there is none, a 400 when it is not JSON. */
export async function jsonBody({ request }: { request: Request }): Promise<unknown> {
  const text = await request.text()
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
  const stack: [unknown, number][] = [[value, 1]]
  while (stack.length > 0) {
    const [node, depth] = stack.pop()!
    if (node === null || typeof node !== 'object') continue
    if (depth > limit) return true
    for (const child of Object.values(node))
      if (child !== null && typeof child === 'object') stack.push([child, depth + 1])
  }
  return false
}
