// The errors a supplier call rejects with, apart from an abort's reason and the deadline's
// TimeoutError.

/** The connection broke, or the answer was not HTTP/1.1: the call failed before or during the body. */
export class UpstreamConnectionError extends Error {
  override readonly name = 'UpstreamConnectionError'
}

/**
 * The answer's body, or a chunked body's framing, was longer than the call's maxBodyBytes: the rest
 * of it was never read.
 */
export class UpstreamBodyTooLarge extends Error {
  override readonly name = 'UpstreamBodyTooLarge'
}
