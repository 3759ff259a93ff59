// A JSON-RPC proxy of the tests' own in front of anvil, modelling an RPC that lies: each call goes
// to the upstream of the moment (switched to another chain's node at will), and a test's `lie`
// may answer a call itself or rewrite the upstream's answer before the caller sees it.

export interface RpcCall {
  jsonrpc: '2.0'
  id: number | string
  method: string
  params?: unknown[]
}

/** The caller's answer: the upstream's (`real`), or another of the lie's own. */
export type Lie = (
  call: RpcCall,
  real: () => Promise<{ result?: unknown; error?: unknown }>,
) => Promise<unknown>

export interface LyingRpc {
  url: string
  /** Sends every call from now on to this node. */
  route(upstreamUrl: string): void
  /** Answers every call from now on through `lie`; none: the upstream's answers, untouched. */
  lie(lie: Lie | null): void
  /** Calls to the upstream by method, answered or not. */
  calls: Record<string, number>
  stop(): void
}

export function startLyingRpc(upstreamUrl: string): LyingRpc {
  let upstream = upstreamUrl
  let lying: Lie | null = null
  const calls: Record<string, number> = {}

  const forward = async (call: RpcCall) => {
    const response = await fetch(upstream, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(call),
    })
    return (await response.json()) as { result?: unknown; error?: unknown }
  }
  async function answer(call: RpcCall): Promise<unknown> {
    calls[call.method] = (calls[call.method] ?? 0) + 1
    if (!lying) return forward(call)
    const answered = await lying(call, () => forward(call))
    return { jsonrpc: '2.0', id: call.id, ...(answered as object) }
  }

  const server = Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    async fetch(request) {
      const body = (await request.json()) as RpcCall | RpcCall[]
      return Response.json(Array.isArray(body) ? await Promise.all(body.map(answer)) : await answer(body))
    },
  })
  return {
    url: `http://127.0.0.1:${server.port}`,
    route(url) {
      upstream = url
    },
    lie(lie) {
      lying = lie
    },
    calls,
    stop() {
      server.stop(true)
    },
  }
}
