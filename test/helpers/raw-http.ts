// One HTTP/1.1 request written byte for byte on its own connection: the target goes out as written
// (fetch would remove dot segments and re-encode), and so does the body.
export interface RawResponse {
  status: number
  headers: Headers
  text: string
}

/** A chunked body with its framing taken off. */
export function dechunk(body: Buffer): Buffer {
  const parts: Buffer[] = []
  let at = 0
  while (at < body.length) {
    const end = body.indexOf('\r\n', at)
    if (end < 0) break
    const size = Number.parseInt(body.subarray(at, end).toString('latin1'), 16)
    if (!size) break
    parts.push(body.subarray(end + 2, end + 2 + size))
    at = end + 2 + size + 2
  }
  return Buffer.concat(parts)
}

export async function rawRequest(
  baseUrl: string,
  method: string,
  target: string,
  headers: Record<string, string>,
  body?: Uint8Array,
): Promise<RawResponse> {
  const { hostname, host, port } = new URL(baseUrl)
  const chunks: Buffer[] = []
  const closed = Promise.withResolvers<void>()
  // write() takes what the socket buffers now; the rest goes as it drains
  let pending = Buffer.alloc(0)
  const flush = (socket: { write(data: Buffer): number }) => {
    while (pending.length > 0) {
      const wrote = socket.write(pending)
      if (wrote <= 0) return
      pending = pending.subarray(wrote)
    }
  }
  const socket = await Bun.connect({
    hostname: hostname.replace(/^\[|\]$/g, ''),
    port: Number(port),
    socket: {
      data: (_s, data) => void chunks.push(Buffer.from(data)),
      close: () => closed.resolve(),
      error: () => closed.resolve(),
      drain: (s) => flush(s),
    },
  })
  const lines = [`${method} ${target} HTTP/1.1`, `Host: ${host}`, 'Connection: close']
  for (const [name, value] of Object.entries(headers)) lines.push(`${name}: ${value}`)
  if (body !== undefined) lines.push(`Content-Length: ${body.length}`)
  pending = Buffer.concat([Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'latin1'), Buffer.from(body ?? [])])
  flush(socket)
  await closed.promise
  const answer = Buffer.concat(chunks)
  const split = answer.indexOf('\r\n\r\n')
  const head = answer
    .subarray(0, split < 0 ? answer.length : split)
    .toString('latin1')
    .split('\r\n')
  const parsed = new Headers()
  for (const line of head.slice(1)) {
    const colon = line.indexOf(':')
    if (colon > 0) parsed.append(line.slice(0, colon).trim(), line.slice(colon + 1).trim())
  }
  const rest = split < 0 ? Buffer.alloc(0) : answer.subarray(split + 4)
  const bytes = parsed.get('transfer-encoding')?.includes('chunked') ? dechunk(rest) : rest
  return { status: Number(head[0]?.split(' ')[1] ?? 0), headers: parsed, text: bytes.toString('utf8') }
}
