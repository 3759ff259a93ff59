// A replacement: the same EIP-1559 transaction (its nonce, call, value and gas limit) signed again
// with higher fees, so a node takes it in place of one it holds unmined. Used by the relayer and the
// payout wallet, each for its own key. A cancel: a transfer of nothing from the key to itself at
// that nonce, with fees raised the same, so the nonce is used and the sends after it move.
import { type Hex, keccak256, type PrivateKeyAccount, type PublicClient, parseTransaction } from 'viem'

/** The gas of a plain transfer, a cancel's whole gas limit. */
const CANCEL_GAS = 21_000n

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
export function signReplacement(
  account: PrivateKeyAccount,
  client: PublicClient,
  rawTx: Hex,
  ceiling?: bigint,
): Promise<Replacement> {
  return signRaised(account, client, rawTx, ceiling, false)
}

/**
 * Signs a cancel of `rawTx`: its nonce, with fees raised as signReplacement raises them. Its cost,
 * 21,000 gas at its max fee, is held to what the send could cost at the ceiling (its gas limit at
 * `ceiling` per gas); AboveFeeCeiling when even the smallest raise costs more.
 */
export function signCancel(
  account: PrivateKeyAccount,
  client: PublicClient,
  rawTx: Hex,
  ceiling: bigint,
): Promise<Replacement> {
  return signRaised(account, client, rawTx, ceiling, true)
}

/** True when `rawTx` is a cancel signed by `from`: nothing sent to itself, no call. */
export function isCancel(rawTx: Hex, from: Hex): boolean {
  const tx = parseTransaction(rawTx)
  return (
    tx.to?.toLowerCase() === from.toLowerCase() &&
    (tx.value ?? 0n) === 0n &&
    (tx.data ?? '0x') === '0x' &&
    tx.gas === CANCEL_GAS
  )
}

async function signRaised(
  account: PrivateKeyAccount,
  client: PublicClient,
  rawTx: Hex,
  sendCeiling: bigint | undefined,
  cancel: boolean,
): Promise<Replacement> {
  const before = parseTransaction(rawTx)
  if (before.type !== 'eip1559' || before.nonce === undefined) {
    throw new Error(`cannot raise the fee of a ${before.type} transaction`)
  }
  const gas = cancel ? CANCEL_GAS : before.gas
  const ceiling =
    cancel && sendCeiling !== undefined
      ? ((before.gas ?? CANCEL_GAS) * sendCeiling) / CANCEL_GAS
      : sendCeiling
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
    ...(cancel
      ? { to: account.address, value: 0n }
      : { to: before.to, data: before.data, value: before.value }),
    gas,
    maxPriorityFeePerGas: tip,
    maxFeePerGas,
  })
  return {
    nonce: before.nonce,
    txHash: keccak256(signed),
    rawTx: signed,
    maxFeePerGas,
    cost: (gas ?? 0n) * maxFeePerGas + (cancel ? 0n : (before.value ?? 0n)),
  }
}

function highest(...fees: bigint[]): bigint {
  let top = 0n
  for (const fee of fees) if (fee > top) top = fee
  return top
}
