// The paid routes (POST chat, Responses, Messages) served from Bun.serve's own route table, ahead
// of Elysia: the steps the app's hooks and the `buyerKey` macro take for them, in one function and
// in the same order (request id, declared length, key, body, validation, handler; errors in the
// contract's shape; metrics and the log line once the answer is out). Elysia keeps these routes
// for the contract's documents and for every other method on their paths. At one client Elysia's
// lifecycle cost a stream's first byte most (BENCHMARKS.md, "The paid routes ahead of Elysia").
import { getSchemaValidator, type TSchema } from 'elysia'
import { ApiError } from '../errors.ts'
import { presentedKeyDigest } from './auth.ts'
import { toApiError } from './error-handler.ts'
import { errorResponse } from './errors.ts'
import type { PaidHandler } from './inference/call.ts'
import { boundBody, jsonBody } from './json-body.ts'
import { beginRequest, requestIdHeaders } from './request-context.ts'
import { checkRequestUrl } from './request-url.ts'

export interface DirectRoute {
  path: string
  body: TSchema
  // biome-ignore lint/suspicious/noExplicitAny: each route's handler takes its own schema's body
  handle: PaidHandler<any>
}

/** What the app does once a response is out: its metrics and log line (app.ts). */
export type Finish = (request: Request, route: string, path: string, status: number, failure: unknown) => void

/** Elysia's own check of a body schema, as its routes compile it (the app does not normalise). */
function bodyCheck(path: string, schema: TSchema) {
  const validator = getSchemaValidator(schema, { normalize: false })
  // Elysia would fill defaults and decode transforms before the handler; these routes do neither.
  if (!validator || validator.hasDefault || validator.hasTransform)
    throw new Error(`${path}: a body schema with defaults or transforms cannot be served directly`)
  return validator
}

function directRoute(route: DirectRoute, maxBodyBytes: number, finish: Finish) {
  const check = bodyCheck(route.path, route.body)
  return async (request: Request): Promise<Response> => {
    const id = beginRequest(request).id
    let response: Response
    let failure: unknown = null
    try {
      let body: unknown
      let buyerKey: { apiKeyDigest: string }
      checkRequestUrl(request)
      boundBody(request, maxBodyBytes)
      try {
        buyerKey = { apiKeyDigest: presentedKeyDigest(request) }
        body = await jsonBody({ request })
      } catch (error) {
        // As Elysia's parse phase: its ParseError carries what was thrown.
        throw toApiError('PARSE', error instanceof ApiError ? error : { cause: error })
      }
      if (!check.Check(body)) {
        throw toApiError('VALIDATION', { type: 'body', valueError: check.Errors(body).First() })
      }
      const set = { headers: requestIdHeaders(id) }
      response = await route.handle({ body, buyerKey, request, set })
    } catch (error) {
      const apiError = toApiError('UNKNOWN', error)
      if (apiError.status >= 500) failure = error
      response = errorResponse(apiError, requestIdHeaders(id), request)
    }
    const status = response.status
    // Bun's table matched the path itself: it is the route's.
    setImmediate(() => finish(request, route.path, route.path, status, failure))
    return response
  }
}

/** Bun.serve's routes for `routes`, each under its POST. */
export function directRoutes(routes: DirectRoute[], maxBodyBytes: number, finish: Finish) {
  const table: Record<string, { POST: (request: Request) => Promise<Response> }> = {}
  for (const route of routes) table[route.path] = { POST: directRoute(route, maxBodyBytes, finish) }
  return table
}
