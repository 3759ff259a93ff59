// An HTTP request as the inference service sees it: its request id, a fresh support reference
// (kept on the request's context for its log line) and the signal that says the client left.
import { type InferenceCall, inferenceCall } from '../../inference/service.ts'
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
