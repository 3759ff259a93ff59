// A JSON-RPC proxy of the tests' own in front of anvil, modelling a load-balanced RPC whose nodes
// are at different heights: a read may be answered by a node `blocks` behind the head. Receipts
// and the wallet's mined nonce lag independently (a receipt mined above the lagging node's head
// is null; a `latest`/`pending` nonce is the one at its head). It can also drop requests (sent
// on, the answer lost: the caller sees a 502) and reorder answers (each held a random while).
// Reads at a block number pass untouched: a node serves the blocks it has.
// With `staleFork`, receipts come from a node still on the fork a reorg left: a receipt it answered
// once is answered again, block and all, after the fresh node has lost it.
// Random choices come from a seeded generator, so a run is reproducible. It counts every call by
// method, and keeps each log query's block range, so a test can count what a pass asked for.

export interface Lag {
  /** How far behind the head the lagging node is. */
  blocks: number
  /** Share of reads (0..1) the lagging node answers. */
  share: number
}

export interface Misbehaviour {
  receipts?: Lag
  nonces?: Lag
  /** Share of requests whose answer is lost after the upstream ran them. */
  drop?: number
  /** Answers are held up to this many ms each, so concurrent ones come back out of order. */
  reorderMs?: number
  /** Receipts answered before are answered again when the fresh node no longer has them. */
  staleFork?: boolean
}

interface RpcCall {
  jsonrpc: '2.0'
  id: number | string
  method: string
  params?: unknown[]
}

export interface LaggingRpc {
  url: string
  /** Replaces the misbehaviour (an empty one: every read is fresh and answered). */
  set(misbehaviour: Misbehaviour): void
  /** Reads answered from the lagging node so far, per method. */
  lagged: Record<string, number>
  /** Every call so far, per method. */
  calls: Record<string, number>
  /** Each eth_getLogs call's block range, in order. */
  logRanges: [bigint, bigint][]
  stop(): void
}

/** mulberry32: small, seeded, good enough to pick which reads lag. */
function seeded(seed: number) {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296
  }
}

export function startLaggingRpc(upstreamUrl: string, seed = 1): LaggingRpc {
  let now: Misbehaviour = {}
  const random = seeded(seed)
  const lagged: Record<string, number> = {}

  const upstream = async (call: Omit<RpcCall, 'jsonrpc' | 'id'>): Promise<{ result?: unknown }> => {
    const response = await fetch(upstreamUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 0, ...call }),
    })
    return (await response.json()) as { result?: unknown }
  }
  const laggingHead = async (lag: Lag) => {
    const head = BigInt((await upstream({ method: 'eth_blockNumber', params: [] })).result as string)
    const behind = head - BigInt(lag.blocks)
    return behind < 0n ? 0n : behind
  }
  const lags = (lag: Lag | undefined): lag is Lag => lag !== undefined && random() < lag.share
  const count = (method: string) => {
    lagged[method] = (lagged[method] ?? 0) + 1
  }

  const seen = new Map<string, unknown>()
  /** A receipt as the fork a reorg left still holds it: the last one answered for the hash. */
  async function staleAnswer(call: RpcCall): Promise<unknown> {
    const hash = String(call.params?.[0]).toLowerCase()
    const fresh = await upstream(call)
    if (fresh.result) seen.set(hash, fresh.result)
    else if (now.staleFork && seen.has(hash)) {
      count(call.method)
      return { jsonrpc: '2.0', id: call.id, result: seen.get(hash) }
    }
    return { ...fresh, jsonrpc: '2.0', id: call.id }
  }

  /** The answer of the lagging node, or undefined where the fresh one answers. */
  async function laggingAnswer(call: RpcCall): Promise<unknown | undefined> {
    if (call.method === 'eth_getTransactionReceipt' && lags(now.receipts)) {
      // The one fresh read is the answer when the lagging node has the receipt too: read again, it
      // could differ (anvil mines a block a moment after it answers the transaction's broadcast).
      const fresh = await upstream(call)
      const receipt = fresh.result as { blockNumber?: string } | null | undefined
      if (!receipt?.blockNumber || BigInt(receipt.blockNumber) <= (await laggingHead(now.receipts)))
        return { ...fresh, jsonrpc: '2.0', id: call.id }
      count(call.method)
      return { jsonrpc: '2.0', id: call.id, result: null }
    }
    if (call.method === 'eth_getTransactionCount') {
      const [address, tag] = (call.params ?? []) as [string, string]
      if ((tag === 'latest' || tag === 'pending') && lags(now.nonces)) {
        const head = await laggingHead(now.nonces)
        count(call.method)
        const old = await upstream({ method: call.method, params: [address, `0x${head.toString(16)}`] })
        return { jsonrpc: '2.0', id: call.id, result: old.result }
      }
    }
    return undefined
  }

  const calls: Record<string, number> = {}
  const logRanges: [bigint, bigint][] = []
  async function answer(call: RpcCall): Promise<unknown> {
    calls[call.method] = (calls[call.method] ?? 0) + 1
    if (call.method === 'eth_getLogs') {
      const { fromBlock, toBlock } = (call.params?.[0] ?? {}) as { fromBlock: string; toBlock: string }
      logRanges.push([BigInt(fromBlock), BigInt(toBlock)])
    }
    const lagging = await laggingAnswer(call)
    if (lagging !== undefined) return lagging
    if (call.method === 'eth_getTransactionReceipt') return staleAnswer(call)
    const response = await fetch(upstreamUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(call),
    })
    return response.json()
  }

  const server = Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    async fetch(request) {
      const body = (await request.json()) as RpcCall | RpcCall[]
      const reply = Array.isArray(body) ? await Promise.all(body.map(answer)) : await answer(body)
      if (now.drop && random() < now.drop) return new Response('answer lost', { status: 502 })
      if (now.reorderMs) await Bun.sleep(Math.floor(random() * now.reorderMs))
      return Response.json(reply)
    },
  })

  return {
    url: `http://127.0.0.1:${server.port}`,
    set(misbehaviour) {
      now = misbehaviour
    },
    lagged,
    calls,
    logRanges,
    stop() {
      server.stop(true)
    },
  }
}
