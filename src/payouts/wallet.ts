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
import { shortMessage } from '../funding/relayer.ts'
import { redactUrls } from '../logger.ts'

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
    address: account.address,
    /** Transactions of the wallet mined so far (`latest`), or known to the node (`pending`). */
    nonce: (blockTag: 'latest' | 'pending') =>
      client.getTransactionCount({ address: account.address, blockTag }),
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
