// A test's gate on the simulated supplier's streams (the `holdFirstToken` setting): while it is
// held, every stream's first token waits for the release, so a request stays in flight exactly as
// long as the test needs, however fast or slow the machine runs.

export class FirstTokenGate {
  private released = Promise.withResolvers<void>()

  /** Lets every held stream go on; the streams after it do not hold. */
  release(settings: { holdFirstToken: boolean }): void {
    settings.holdFirstToken = false
    this.released.resolve()
    this.released = Promise.withResolvers<void>()
  }

  /** True once released; false as soon as the stream's client goes away. */
  passed(signal: AbortSignal): Promise<boolean> {
    if (signal.aborted) return Promise.resolve(false)
    return new Promise((resolve) => {
      const onAbort = () => resolve(false)
      signal.addEventListener('abort', onAbort, { once: true })
      this.released.promise.then(() => {
        signal.removeEventListener('abort', onAbort)
        resolve(true)
      })
    })
  }
}

/** Ends a stream whose client left: it may already be cancelled by that same departure. */
export function endQuietly(controller: ReadableStreamDefaultController<Uint8Array>): void {
  try {
    controller.close()
  } catch {
    // cancelled already
  }
}
