// An HTTP request as the inference service sees it: its request id, a fresh support reference
// (kept on the request's context for its log line) and the signal that says the client left.
import type { ChatAnswer, InferenceCall } from '../../inference/service.ts'
import { inferenceCall } from '../../inference/service.ts'
import { ownResponse, type SetHeaders } from '../own-response.ts'
import { requestContext } from '../request-context.ts'

export function callOf(request: Request): InferenceCall {
  const context = requestContext(request)
  const call = inferenceCall(context.id, request.signal)
  context.supportReference = call.supportReference
  return call
}

/** Notes what a request was charged on its log line. */
export function noteCost(request: Request, costUsdc: string): void {
  requestContext(request).costUsdc = costUsdc
}

/** What a paid route's handler takes: from Elysia's context, or from the direct routes (direct-routes.ts). */
export interface PaidRequest<B> {
  body: B
  buyerKey: { apiKeyDigest: string }
  request: Request
  set: SetHeaders
}

export type PaidHandler<B> = (input: PaidRequest<B>) => Promise<Response>

/** Runs an inference call for a request and sends its answer, noting its cost on the log line. */
export async function sendAnswer(
  request: Request,
  set: SetHeaders,
  run: (call: InferenceCall) => Promise<ChatAnswer>,
) {
  const answer = await run(callOf(request))
  if (answer.costUsdc !== null) noteCost(request, answer.costUsdc)
  return ownResponse(set, answer.body, answer.headers)
}
