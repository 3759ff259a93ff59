// Reads from the funding chain. Block numbers and receipts are read without viem's cache: the
// confirmations watcher and the reconciler must see the chain as it is now.
import {
  type Address,
  type Chain,
  createPublicClient,
  type Hex,
  hexToBytes,
  http,
  keccak256,
  type PublicClient,
  pad,
  parseAbi,
  TransactionNotFoundError,
  TransactionReceiptNotFoundError,
  toHex,
  WaitForTransactionReceiptTimeoutError,
} from 'viem'
import { base, baseSepolia } from 'viem/chains'
import type { FundingConfig, X402Network } from '../config.ts'

// Here, not in network.ts: viem's chain table is most of viem's load time, and only a process that
// reads the chain needs it.
const CHAINS: Record<X402Network, Chain> = { base, 'base-sepolia': baseSepolia }

export const eip3009Abi = parseAbi([
  'function transferWithAuthorization(address from, address to, uint256 value, uint256 validAfter, uint256 validBefore, bytes32 nonce, uint8 v, bytes32 r, bytes32 s)',
  'function transferWithAuthorization(address from, address to, uint256 value, uint256 validAfter, uint256 validBefore, bytes32 nonce, bytes signature)',
  'function authorizationState(address authorizer, bytes32 nonce) view returns (bool)',
  'event Transfer(address indexed from, address indexed to, uint256 value)',
  'event AuthorizationUsed(address indexed authorizer, bytes32 indexed nonce)',
])

// Providers cap the block range of one eth_getLogs call; ranges this size pass the common caps.
const LOG_RANGE = 2_000n

export interface Receipt {
  status: 'success' | 'reverted'
  blockNumber: bigint
  blockHash: Hex
  /** The token transfers the transaction emitted. */
  transfers: Transfer[]
  /**
   * The EIP-3009 authorizations the transaction used (AuthorizationUsed events), each with the
   * token's Transfer logged right after it (its own), or null when the next log is not one.
   */
  authorizations: { token: Address; authorizer: Address; nonce: Hex; transfer: Transfer | null }[]
}

export interface Transfer {
  token: Address
  from: Address
  to: Address
  value: bigint
}

/** A log's token transfer (the ERC-20 Transfer event, from and to indexed); null for any other log. */
function transferOf(log: { address: Address; topics: readonly Hex[]; data: Hex }): Transfer | null {
  if (log.topics[0] !== TRANSFER_TOPIC || log.topics.length !== 3) return null
  return {
    token: log.address,
    from: `0x${(log.topics[1] as Hex).slice(26)}` as Address,
    to: `0x${(log.topics[2] as Hex).slice(26)}` as Address,
    value: BigInt(log.data),
  }
}

/**
 * The transaction that ended an authorization: one that used it (AuthorizationUsed), or the
 * payer's cancellation (AuthorizationCanceled: no transfer can use it, no money moved).
 */
export interface AuthorizationEnd {
  transaction: Hex
  blockNumber: bigint
  canceled: boolean
}

export type FundingChain = ReturnType<typeof fundingChain>

export function fundingChain(config: FundingConfig, pollingIntervalMs = 250) {
  const chain = { ...CHAINS[config.network], rpcUrls: { default: { http: [config.chainRpcUrl] } } }
  const client: PublicClient = createPublicClient({
    chain,
    transport: http(config.chainRpcUrl),
    cacheTime: 0,
    pollingInterval: pollingIntervalMs,
  })

  const toReceipt = (r: Awaited<ReturnType<PublicClient['getTransactionReceipt']>>): Receipt => {
    // Only the transaction's own logs, in their order: a log naming another transaction or block is
    // no word about this one, and a reverted transaction logged nothing.
    const logs =
      r.status === 'success'
        ? r.logs
            .filter(
              (log) =>
                same(log.transactionHash ?? '', r.transactionHash) && same(log.blockHash ?? '', r.blockHash),
            )
            .sort((a, b) => (a.logIndex ?? 0) - (b.logIndex ?? 0))
        : []
    const transfers = logs.map(transferOf)
    return {
      status: r.status,
      blockNumber: r.blockNumber,
      blockHash: r.blockHash,
      transfers: transfers.filter((t) => t !== null),
      // The token logs an authorization's use right before the transfer it authorized: each use is
      // paired with that log alone, so one transfer never settles two authorizations.
      authorizations: logs.flatMap((log, i) => {
        if (log.topics[0] !== AUTHORIZATION_USED_TOPIC || log.topics.length !== 3) return []
        const authorizer = `0x${(log.topics[1] as Hex).slice(26)}` as Address
        const next = transfers[i + 1]
        const paired = next && same(next.token, log.address) && same(next.from, authorizer) ? next : null
        return [{ token: log.address, authorizer, nonce: log.topics[2] as Hex, transfer: paired }]
      }),
    }
  }

  /** The receipt of a transaction, or null while it is not mined (or unknown). */
  async function receipt(hash: Hex): Promise<Receipt | null> {
    try {
      return toReceipt(await client.getTransactionReceipt({ hash }))
    } catch (error) {
      if (error instanceof TransactionReceiptNotFoundError) return null
      throw error
    }
  }

  async function onChain(at: Pick<Receipt, 'blockNumber' | 'blockHash'>): Promise<boolean> {
    const block = await client.getBlock({ blockNumber: at.blockNumber })
    return block.hash?.toLowerCase() === at.blockHash.toLowerCase()
  }

  return {
    client,
    chain,
    /** The USDC token this chain's transfers are in. */
    token: config.usdcAddress,
    blockNumber: () => client.getBlockNumber({ cacheTime: 0 }),
    /** The latest block's number and time (unix seconds: no later block is older), read together from one node. */
    async latest(): Promise<{ number: bigint; timestamp: bigint }> {
      const block = await client.getBlock({ blockTag: 'latest' })
      return { number: block.number, timestamp: block.timestamp }
    },
    /** A block's time (unix seconds), by its number. */
    async blockTime(number: bigint): Promise<bigint> {
      return (await client.getBlock({ blockNumber: number })).timestamp
    },
    receipt,
    /**
     * Whether the receipt's block is the chain's at its height. A node still on a fork a reorg left
     * answers the receipt it holds there; the block read again by number says which chain it is.
     */
    onChain: (receipt: Pick<Receipt, 'blockNumber' | 'blockHash'>) => onChain(receipt),
    /** The transaction's receipt while its block is the chain's at its height; null otherwise. */
    async receiptOnChain(hash: Hex): Promise<Receipt | null> {
      const found = await receipt(hash)
      return found && (await onChain(found)) ? found : null
    },
    /** Waits for a receipt at most `timeoutMs`; null when it did not come in time (or never can). */
    async waitForReceipt(hash: Hex, timeoutMs: number): Promise<Receipt | null> {
      try {
        const receipt = await client.waitForTransactionReceipt({ hash, timeout: timeoutMs })
        // viem answers a replacement's receipt when another transaction took the nonce: not this one's
        if (receipt.transactionHash.toLowerCase() !== hash.toLowerCase()) return null
        return toReceipt(receipt)
      } catch (error) {
        if (error instanceof WaitForTransactionReceiptTimeoutError) return null
        throw error
      }
    },
    /**
     * Whether the token has seen this authorization used (EIP-3009 authorizationState), at the head
     * or, given `blockNumber`, as of that block (a node that has not seen it cannot answer).
     */
    authorizationUsed(payer: Address, nonce: Hex, blockNumber?: bigint): Promise<boolean> {
      return client.readContract({
        address: config.usdcAddress,
        abi: eip3009Abi,
        functionName: 'authorizationState',
        args: [payer, nonce],
        ...(blockNumber !== undefined && { blockNumber }),
      })
    },
    /**
     * The transaction that ended this authorization, found by the token's AuthorizationUsed or
     * AuthorizationCanceled event (payer and nonce, both indexed) from `fromBlock` to the head; null
     * when there is none. `head`: the last block searched. Both events in one query: the token sets
     * one state for either, so "used" at a block may mean canceled, and only the log says which.
     */
    async authorizationUse(
      payer: Address,
      nonce: Hex,
      fromBlock: bigint,
    ): Promise<{ end: AuthorizationEnd | null; head: bigint }> {
      const head = await client.getBlockNumber({ cacheTime: 0 })
      const topics: (Hex | Hex[])[] = [
        [AUTHORIZATION_USED_TOPIC, AUTHORIZATION_CANCELED_TOPIC],
        pad(payer),
        nonce,
      ]
      for (let from = fromBlock; from <= head; from += LOG_RANGE) {
        const to = from + LOG_RANGE - 1n < head ? from + LOG_RANGE - 1n : head
        const logs = await client.request({
          method: 'eth_getLogs',
          params: [{ address: config.usdcAddress, topics, fromBlock: toHex(from), toBlock: toHex(to) }],
        })
        const log = logs.find((l) => !l.removed && l.transactionHash && l.blockNumber)
        if (log) {
          const canceled = log.topics[0]?.toLowerCase() === AUTHORIZATION_CANCELED_TOPIC
          const end = { transaction: log.transactionHash!, blockNumber: BigInt(log.blockNumber!), canceled }
          return { end, head }
        }
      }
      return { end: null, head }
    },
    /**
     * The token's Transfer of `value` from `from` to `to` logged by one of `hashes`, from `fromBlock`
     * to the head, in a block still the chain's whose logs bloom holds it (the token, the event and
     * both parties); null when there is none.
     */
    async transferBy(
      hashes: readonly Hex[],
      transfer: { from: Address; to: Address; value: bigint },
      fromBlock: bigint,
    ): Promise<Hex | null> {
      const head = await client.getBlockNumber({ cacheTime: 0 })
      for (let from = fromBlock; from <= head; from += LOG_RANGE) {
        const to = from + LOG_RANGE - 1n < head ? from + LOG_RANGE - 1n : head
        const logs = await client.getContractEvents({
          address: config.usdcAddress,
          abi: eip3009Abi,
          eventName: 'Transfer',
          args: { from: transfer.from, to: transfer.to },
          fromBlock: from,
          toBlock: to,
        })
        for (const log of logs) {
          const { transactionHash: hash, blockHash, blockNumber } = log
          if (log.removed || !hash || !blockHash || blockNumber === null) continue
          if (!same(log.address, config.usdcAddress) || !same(log.args.from ?? '', transfer.from)) continue
          if (!same(log.args.to ?? '', transfer.to) || log.args.value !== transfer.value) continue
          if (!hashes.some((h) => same(h, hash))) continue
          // A log the block's own bloom cannot hold was never logged there: an RPC's forgery.
          const block = await client.getBlock({ blockNumber })
          if (!same(block.hash ?? '', blockHash) || !block.logsBloom) continue
          const topics = [TRANSFER_TOPIC, pad(transfer.from), pad(transfer.to)] as Hex[]
          if (bloomHolds(block.logsBloom, [config.usdcAddress, ...topics])) return hash
        }
      }
      return null
    },
    /** Whether a node knows the transaction at all (mined or in its mempool). */
    async known(hash: Hex): Promise<boolean> {
      try {
        await client.getTransaction({ hash })
        return true
      } catch (error) {
        // Only the node's own "no such transaction" says it is gone. A call that failed (a node
        // down, lagging or timing out) says nothing: the reconciler must not release the claim of
        // a transfer that may still be mined, so that is an error it retries later.
        if (error instanceof TransactionNotFoundError) return false
        throw error
      }
    },
  }
}

// keccak256("Transfer(address,address,uint256)")
const TRANSFER_TOPIC = '0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef'
// keccak256("AuthorizationUsed(address,bytes32)")
const AUTHORIZATION_USED_TOPIC = '0x98de503528ee59b575ef0c0a2576a82497bfc029a5685b209e9ec333479b10a5'
// keccak256("AuthorizationCanceled(address,bytes32)")
const AUTHORIZATION_CANCELED_TOPIC = '0x1cdd46ff242716cdaa72d159d339a485b3438398348d68f09d7c8c0a59353d81'

const same = (a: string, b: string) => a.toLowerCase() === b.toLowerCase()

/**
 * Whether a block's logs bloom (2,048 bits) holds every item (a log's address or topic): each sets
 * three bits, from the first three pairs of bytes of its hash. A bloom never leaves out a logged
 * item; it may hold one never logged.
 */
function bloomHolds(bloom: Hex, items: readonly Hex[]): boolean {
  const bits = hexToBytes(bloom)
  if (bits.length !== 256) return false
  return items.every((item) => {
    const hash = keccak256(item, 'bytes')
    for (let i = 0; i < 6; i += 2) {
      const bit = ((hash[i]! << 8) | hash[i + 1]!) & 2047
      if ((bits[255 - (bit >> 3)]! & (1 << (bit & 7))) === 0) return false
    }
    return true
  })
}

/** True when the receipt holds the transfer the authorization promised. */
export function hasTransfer(
  receipt: Receipt,
  token: Address,
  from: Address,
  to: Address,
  value: bigint,
): boolean {
  return receipt.transfers.some(
    (t) => same(t.token, token) && same(t.from, from) && same(t.to, to) && t.value === value,
  )
}

/**
 * True when the receipt is this authorization's settlement: the token used it (payer and nonce)
 * and, in the log right after, moved its value from the payer to `to`. A transfer alone could be any other of the payer's
 * payments of the same amount, or a plain transfer that left the authorization unused.
 */
export function settlesAuthorization(
  receipt: Receipt,
  token: Address,
  authorization: { from: Address; nonce: Hex; value: bigint },
  to: Address,
): boolean {
  const { from, nonce, value } = authorization
  return receipt.authorizations.some(
    (a) =>
      same(a.token, token) &&
      same(a.authorizer, from) &&
      same(a.nonce, nonce) &&
      a.transfer !== null &&
      same(a.transfer.to, to) &&
      a.transfer.value === value,
  )
}
