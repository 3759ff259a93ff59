// A JSON-RPC proxy of the tests' own in front of anvil, modelling a Geth-style pool where anvil has
// none: a transaction whose max fee is under the node's base fee is kept PENDING in the pool, not
// dropped (anvil drops it), and every later nonce of its sender waits behind it. `riseAtNextSend`
// is the base fee rising right after a send was priced: that send is held, and the proxy's base
// fee is the one blocks report from then on (what a fee estimate asks), and the one the fees
// eth_fillTransaction fills in follow, as Geth's do (twice the base fee plus the tip). A send the
// proxy holds counts in the sender's pending nonce and is found by its hash, with no receipt. A
// replacement at a held nonce needs both fees at least 10 % higher, as Geth asks; once a held
// transaction pays the base fee and its nonce is next, it goes on to anvil and is mined there.
import {
  type Hex,
  keccak256,
  parseTransaction,
  recoverTransactionAddress,
  type TransactionSerialized,
} from 'viem'

interface Held {
  raw: Hex
  hash: Hex
  from: Hex
  tx: ReturnType<typeof parseTransaction>
}

interface RpcCall {
  jsonrpc: '2.0'
  id: number | string
  method: string
  params?: unknown[]
}

export interface HoldingRpc {
  url: string
  /** The base fee becomes `baseFee` as the next transaction arrives (before it is judged). */
  riseAtNextSend(baseFee: bigint): void
  /** Every transaction broadcast through the proxy, in order, as it arrived. */
  broadcasts: Held[]
  stop(): void
}

const bumped = (fee: bigint | undefined) => (fee ?? 0n) + (fee ?? 0n) / 10n

export function startHoldingRpc(upstreamUrl: string): HoldingRpc {
  let baseFee: bigint | undefined
  let rise: bigint | undefined
  /** By sender (lower case), then nonce. */
  const pool = new Map<string, Map<number, Held>>()
  const broadcasts: Held[] = []

  const upstream = async (
    method: string,
    params: unknown[],
  ): Promise<{ result?: unknown; error?: unknown }> => {
    const response = await fetch(upstreamUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 0, method, params }),
    })
    return (await response.json()) as { result?: unknown; error?: unknown }
  }
  const pendingCount = async (from: string) =>
    Number((await upstream('eth_getTransactionCount', [from, 'pending'])).result as string)
  const heldOf = (from: string) => {
    const held = pool.get(from.toLowerCase()) ?? new Map<number, Held>()
    pool.set(from.toLowerCase(), held)
    return held
  }
  const pays = (held: Held) => baseFee === undefined || (held.tx.maxFeePerGas ?? 0n) >= baseFee

  /** Passes the sender's held transactions on to anvil while the next one pays the base fee. */
  async function release(from: string): Promise<void> {
    const held = heldOf(from)
    for (;;) {
      const next = held.get(await pendingCount(from))
      if (!next || !pays(next)) return
      held.delete(next.tx.nonce!)
      await upstream('eth_sendRawTransaction', [next.raw])
    }
  }

  async function send(call: RpcCall): Promise<{ result?: unknown; error?: unknown }> {
    const raw = call.params![0] as Hex
    const tx = parseTransaction(raw)
    const from = (
      await recoverTransactionAddress({ serializedTransaction: raw as TransactionSerialized })
    ).toLowerCase() as Hex
    const entry: Held = { raw, hash: keccak256(raw), from, tx }
    broadcasts.push(entry)
    if (rise !== undefined) [baseFee, rise] = [rise, undefined]
    const held = heldOf(from)
    const before = held.get(tx.nonce!)
    if (before) {
      if (before.hash === entry.hash) return { error: { code: -32000, message: 'already known' } }
      const enough =
        (tx.maxFeePerGas ?? 0n) > bumped(before.tx.maxFeePerGas) &&
        (tx.maxPriorityFeePerGas ?? 0n) > bumped(before.tx.maxPriorityFeePerGas)
      if (!enough) return { error: { code: -32000, message: 'replacement transaction underpriced' } }
      held.set(tx.nonce!, entry)
      await release(from)
      return { result: entry.hash }
    }
    const next = await pendingCount(from)
    if (tx.nonce! >= next && (held.size > 0 || !pays(entry))) {
      held.set(tx.nonce!, entry)
      return { result: entry.hash }
    }
    return upstream(call.method, call.params!)
  }

  async function answer(call: RpcCall): Promise<{ result?: unknown; error?: unknown }> {
    const params = call.params ?? []
    if (call.method === 'eth_sendRawTransaction') return send(call)
    if (call.method === 'eth_getTransactionCount' && params[1] === 'pending') {
      const count = await pendingCount(params[0] as string)
      const held = heldOf(params[0] as string)
      let n = count
      while (held.has(n)) n++
      return { result: `0x${n.toString(16)}` }
    }
    if (call.method === 'eth_getTransactionByHash') {
      for (const held of pool.values())
        for (const h of held.values())
          if (h.hash === (params[0] as string).toLowerCase()) return { result: pending(h) }
    }
    const reply = await upstream(call.method, params)
    if (call.method === 'eth_fillTransaction' && baseFee !== undefined && reply.result) {
      const tx = (reply.result as { tx?: { maxFeePerGas?: string; maxPriorityFeePerGas?: string } }).tx
      if (tx?.maxFeePerGas !== undefined) {
        const asked = 2n * baseFee + BigInt(tx.maxPriorityFeePerGas ?? '0x0')
        if (BigInt(tx.maxFeePerGas) < asked) tx.maxFeePerGas = `0x${asked.toString(16)}`
      }
    }
    if (call.method === 'eth_getBlockByNumber' && baseFee !== undefined && reply.result) {
      const block = reply.result as { baseFeePerGas?: string }
      if (block.baseFeePerGas && BigInt(block.baseFeePerGas) < baseFee)
        block.baseFeePerGas = `0x${baseFee.toString(16)}`
    }
    return reply
  }

  const server = Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    async fetch(request) {
      const body = (await request.json()) as RpcCall | RpcCall[]
      const one = async (call: RpcCall) => ({ jsonrpc: '2.0', id: call.id, ...(await answer(call)) })
      const reply = Array.isArray(body) ? await Promise.all(body.map(one)) : await one(body)
      return Response.json(reply)
    },
  })

  return {
    url: `http://127.0.0.1:${server.port}`,
    broadcasts,
    riseAtNextSend(fee) {
      rise = fee
    },
    stop: () => server.stop(true),
  }
}

/** A held transaction as a node answers one in its pool: no block yet. */
function pending(held: Held) {
  const { tx } = held
  const hex = (value: bigint | number | undefined) => `0x${(value ?? 0).toString(16)}`
  return {
    hash: held.hash,
    from: held.from,
    to: tx.to,
    nonce: hex(tx.nonce),
    input: tx.data ?? '0x',
    value: hex(tx.value),
    gas: hex(tx.gas),
    maxFeePerGas: hex(tx.maxFeePerGas),
    maxPriorityFeePerGas: hex(tx.maxPriorityFeePerGas),
    type: '0x2',
    chainId: hex(tx.chainId),
    accessList: [],
    r: tx.r,
    s: tx.s,
    yParity: hex(tx.yParity),
    v: hex(tx.yParity),
    blockHash: null,
    blockNumber: null,
    transactionIndex: null,
  }
}
