// The operator's payout wallet on the funding chain: reads its nonce and balances, signs USDC
// transfers locally (so a transaction's hash and bytes are known, and recorded, before it is
// broadcast) and broadcasts signed bytes, again as often as needed: the same bytes are the same
// transaction, so a rebroadcast can never pay twice.
import {
  type Account,
  type Address,
  BaseError,
  createWalletClient,
  encodeFunctionData,
  type Hex,
  http,
  keccak256,
  type PrivateKeyAccount,
  parseAbi,
} from 'viem'
import { privateKeyToAccount } from 'viem/accounts'
import type { FundingConfig } from '../config.ts'
import type { FundingChain } from '../funding/chain.ts'
import { type Replacement, signReplacement } from '../funding/replacement.ts'
import { redactUrls, shortMessage } from '../logger.ts'

const erc20 = parseAbi([
  'function transfer(address to, uint256 value) returns (bool)',
  'function balanceOf(address) view returns (uint256)',
])

/** The transfer would revert (the node's gas estimate ran it): nothing was signed. */
export class TransferRefused extends Error {}

export interface SignedTransfer {
  nonce: number
  txHash: Hex
  rawTx: Hex
}

export type PayoutWallet = ReturnType<typeof payoutWallet>

export function payoutWallet(privateKey: Hex, funding: FundingConfig, chain: FundingChain) {
  const account: PrivateKeyAccount = privateKeyToAccount(privateKey)
  const client = chain.client
  const wallet = createWalletClient({ account, chain: chain.chain, transport: http(funding.chainRpcUrl) })
  const token = funding.usdcAddress
  return {
    ...walletReads(account.address, chain),
    usdcBalance: () =>
      client.readContract({ address: token, abi: erc20, functionName: 'balanceOf', args: [account.address] }),
    gasBalance: () => client.getBalance({ address: account.address }),
    /** Signs transfer(to, amount) at `nonce`; TransferRefused when the node says it would revert. */
    async sign(to: Address, amount: bigint, nonce: number): Promise<SignedTransfer> {
      const data = encodeFunctionData({ abi: erc20, functionName: 'transfer', args: [to, amount] })
      let request: Awaited<ReturnType<typeof wallet.prepareTransactionRequest>>
      try {
        request = await wallet.prepareTransactionRequest({
          account: account as Account,
          to: token,
          data,
          nonce,
        })
      } catch (error) {
        if (reverted(error))
          throw new TransferRefused(redactUrls(`transfer would revert: ${shortMessage(error)}`))
        throw error
      }
      const rawTx = await account.signTransaction(
        request as Parameters<PrivateKeyAccount['signTransaction']>[0],
      )
      return { nonce, txHash: keccak256(rawTx), rawTx }
    },
    /**
     * The same transaction signed again with higher fees (its tip and max fee raised by more than
     * 10 %, and at least what the node asks now): a replacement at its nonce.
     */
    bump: (rawTx: Hex): Promise<Replacement> => signReplacement(account, client, rawTx),
  }
}

export type WalletReads = ReturnType<typeof walletReads>

/**
 * What needs no key: a wallet's nonces and its transaction at a nonce, read from the chain, and
 * broadcasting bytes it signed. A payout signed by another payout wallet (a key rotated) is
 * finished with these alone.
 */
export function walletReads(address: Address, chain: FundingChain) {
  const client = chain.client
  return {
    address,
    /** Transactions of the wallet mined so far (`latest`), or known to the node (`pending`). */
    nonce: (blockTag: 'latest' | 'pending') => client.getTransactionCount({ address, blockTag }),
    /**
     * The transaction of this wallet mined at `nonce`, found without an index: the first block
     * from `fromBlock` to the head whose state counts past the nonce (a binary search over
     * historical nonces, a few reads), then that block's transaction from the wallet at that nonce.
     * Null while the chain does not show one (not mined yet, or a node answering from behind).
     */
    async nonceHolder(nonce: number, fromBlock: bigint): Promise<{ hash: Hex; blockNumber: bigint } | null> {
      const countAt = (blockNumber: bigint) => client.getTransactionCount({ address, blockNumber })
      const head = await chain.blockNumber()
      if ((await countAt(head)) <= nonce) return null
      // low counts at most `nonce`, high past it: the holder is in the block right after low
      let low = fromBlock > 0n && (await countAt(fromBlock - 1n)) <= nonce ? fromBlock - 1n : -1n
      let high = head
      while (high - low > 1n) {
        const middle = (low + high) / 2n
        if ((await countAt(middle)) > nonce) high = middle
        else low = middle
      }
      const block = await client.getBlock({ blockNumber: high, includeTransactions: true })
      const holder = block.transactions.find(
        (tx) => tx.from.toLowerCase() === address.toLowerCase() && tx.nonce === nonce,
      )
      return holder ? { hash: holder.hash, blockNumber: high } : null
    },
    /** Broadcasts signed bytes; a node that refuses them (known already, nonce used) is not an error here. */
    async broadcast(rawTx: Hex): Promise<string | null> {
      try {
        await client.sendRawTransaction({ serializedTransaction: rawTx })
        return null
      } catch (error) {
        return redactUrls(shortMessage(error))
      }
    },
  }
}

function reverted(error: unknown): boolean {
  if (!(error instanceof BaseError)) return false
  return Boolean(error.walk((e) => /revert/i.test((e as Error).message ?? '')))
}
