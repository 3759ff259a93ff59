// A body read whole, but never past a cap: the bytes are counted as they stream in, and at the
// first read that goes past the cap the stream is cancelled (the rest is never read or held) and
// the caller's own error is thrown. Used where a peer decides the length: a request body sent
// without Content-Length (http/json-body.ts), an upstream's model list (catalog/sync.ts).

export async function readCapped(
  body: ReadableStream<Uint8Array>,
  maxBytes: number,
  tooLarge: () => Error,
): Promise<Buffer> {
  const reader = body.getReader()
  const parts: Uint8Array[] = []
  let size = 0
  for (;;) {
    const { done, value } = await reader.read()
    if (done) break
    size += value.byteLength
    if (size > maxBytes) {
      // Not awaited: the refusal does not wait on the peer.
      reader.cancel().catch(() => {})
      throw tooLarge()
    }
    parts.push(value)
  }
  return Buffer.concat(parts, size)
}
