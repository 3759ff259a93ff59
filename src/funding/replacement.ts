// A replacement: the same EIP-1559 transaction (its nonce, call, value and gas limit) signed again
// with higher fees, so a node takes it in place of one it holds unmined. Used by the relayer and the
// payout wallet, each for its own key.
import { type Hex, keccak256, type PrivateKeyAccount, type PublicClient, parseTransaction } from 'viem'

/** Fees a replacement must exceed its predecessor's by, as nodes require: at least 10 %. */
const raise = (fee: bigint) => fee + fee / 10n + 1n

/** The replacement would need a max fee per gas above the ceiling: nothing was signed. */
export class AboveFeeCeiling extends Error {
  constructor(
    readonly needed: bigint,
    readonly ceiling: bigint,
  ) {
    super(`a replacement needs a max fee of ${needed} wei per gas, above the ceiling of ${ceiling}`)
  }
}

export interface Replacement {
  nonce: number
  txHash: Hex
  rawTx: Hex
  maxFeePerGas: bigint
  /** What a node asks the sender to hold before it takes the replacement. */
  cost: bigint
}

/**
 * Signs `rawTx` again with its tip and max fee raised by more than 10 %, and at least what the node
 * asks now. Given a ceiling, the max fee is held to it as long as that still beats the old one's;
 * AboveFeeCeiling when even the smallest raise is past it.
 */
export async function signReplacement(
  account: PrivateKeyAccount,
  client: PublicClient,
  rawTx: Hex,
  ceiling?: bigint,
): Promise<Replacement> {
  const before = parseTransaction(rawTx)
  if (before.type !== 'eip1559' || before.nonce === undefined) {
    throw new Error(`cannot raise the fee of a ${before.type} transaction`)
  }
  const least = raise(before.maxFeePerGas ?? 0n)
  const leastTip = raise(before.maxPriorityFeePerGas ?? 0n)
  if (ceiling !== undefined && highest(least, leastTip) > ceiling) {
    throw new AboveFeeCeiling(highest(least, leastTip), ceiling)
  }
  const now = await client.estimateFeesPerGas()
  let tip = highest(leastTip, now.maxPriorityFeePerGas)
  let maxFeePerGas = highest(least, now.maxFeePerGas, tip)
  if (ceiling !== undefined && maxFeePerGas > ceiling) {
    maxFeePerGas = ceiling
    if (tip > ceiling) tip = ceiling
  }
  const signed = await account.signTransaction({
    type: 'eip1559',
    chainId: before.chainId,
    nonce: before.nonce,
    to: before.to,
    data: before.data,
    value: before.value,
    gas: before.gas,
    maxPriorityFeePerGas: tip,
    maxFeePerGas,
  })
  return {
    nonce: before.nonce,
    txHash: keccak256(signed),
    rawTx: signed,
    maxFeePerGas,
    cost: (before.gas ?? 0n) * maxFeePerGas + (before.value ?? 0n),
  }
}

function highest(...fees: bigint[]): bigint {
  let top = 0n
  for (const fee of fees) if (fee > top) top = fee
  return top
}
