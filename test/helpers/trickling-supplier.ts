// A supplier whose stream never ends (a first chunk, then a frame on an interval), and the three
// surfaces a buyer streams it through.

export interface TricklingSupplier {
  url: string
  /** Streams begun and not yet cancelled by the gateway. */
  open(): number
  stop(): void
}

/** Streams `first()`, then `next(n)` (n from 0) every `everyMs` until the gateway cancels. */
export function tricklingSupplier(
  first: () => string,
  next: (n: number) => string,
  everyMs: number,
): TricklingSupplier {
  let open = 0
  const server = Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    fetch() {
      const encoder = new TextEncoder()
      let timer: Timer | undefined
      const body = new ReadableStream<Uint8Array>({
        start(controller) {
          open += 1
          controller.enqueue(encoder.encode(first()))
          let n = 0
          timer = setInterval(() => controller.enqueue(encoder.encode(next(n++))), everyMs)
        },
        cancel() {
          clearInterval(timer)
          open -= 1
        },
      })
      return new Response(body, { headers: { 'content-type': 'text/event-stream' } })
    },
  })
  return { url: `http://127.0.0.1:${server.port}`, open: () => open, stop: () => server.stop(true) }
}

/** Chat, responses and messages requests for `prompt` (streamed once the test adds `stream`). */
export function streamSurfaces(prompt: string, maxTokens: number) {
  const messages = [{ role: 'user', content: prompt }]
  return {
    chat: { path: '/v1/chat/completions', body: { model: 'llama-3.3-70b', messages } },
    responses: { path: '/v1/responses', body: { model: 'llama-3.3-70b', input: prompt } },
    messages: { path: '/v1/messages', body: { model: 'llama-3.3-70b', max_tokens: maxTokens, messages } },
  }
}
