// The relayer key's sends left unmined, for whichever replica holds the key's turn. A node keeps a
// transaction whose max fee fell under the base fee in its pool, unmined, and every later nonce of
// the key waits behind it. What a replacement needs is in Redis (sender-lock.ts: each send's signed
// bytes and when it was broadcast or last signed again), so a send is raised whether its sender
// lives or died. Past SVC_RELAYER_BUMP_MS unmined it is signed again at its nonce with higher fees
// (replacement.ts), up to the ceiling, its new hash recorded on its claim first. One whose claim is
// gone (released: its authorization expired unused), or, with no claim to ask, unmined past the
// authorization's longest life while the ceiling refuses a raise, can never move money: it is
// cancelled, so the sends after it move.
// The node's word decides which sends are unmined, so it is asked which chain it is before the
// count and again before each send is raised or cancelled (a balancer may move between any two
// calls): another chain's count would forget a stuck send here (a higher one) or raise a mined one
// (a lower one). The count is read under the turn, and a send whose own bytes have a receipt is
// mined whatever a node behind counts.
import type { Logger } from 'pino'
import {
  type Hex,
  keccak256,
  type PrivateKeyAccount,
  type PublicClient,
  parseTransaction,
  TransactionReceiptNotFoundError,
} from 'viem'
import { redactUrls, shortMessage } from '../logger.ts'
import { answersForChain } from './on-chain.ts'
import { AboveFeeCeiling, isCancel, type Replacement, signCancel, signReplacement } from './replacement.ts'
import type { HeldTurn, SendTurns } from './sender-lock.ts'

export interface ReplaceOptions {
  /** How long a send may stay unmined before it is signed again with higher fees. */
  afterMs: number
  /** The highest max fee per gas (wei) a send is signed again at. */
  maxFeePerGas: bigint
  /**
   * A send with no claim to ask, unmined this long (since its last signing) with the ceiling
   * refusing a raise, is cancelled: its authorization has expired by then.
   */
  cancelAfterMs?: number
  logger: Logger
}

/**
 * The recorder of the claim a call settles (the hash goes on the claim before the broadcast; it
 * throws once the claim is no longer in flight); undefined for a call that settles none.
 */
export type ClaimOf = (call: { to: Hex; data: Hex }) => ((hash: Hex) => Promise<void>) | undefined

export interface UnminedDeps {
  account: PrivateKeyAccount
  client: PublicClient
  options: ReplaceOptions
  /** When this process last tried each nonce: a refused raise leaves Redis as it was. */
  tried: Map<number, number>
  /** The chain the key's sends are signed for. */
  chainId: number
}

/**
 * Raises the fees of, or cancels, every send of the key unmined for `afterMs`, lowest nonce first,
 * under the key's turn (skipped while another holds it: the next call tries again); resolves with
 * how many replacements and cancels were sent.
 */
export async function replaceDue(deps: UnminedDeps, turns: SendTurns, claimOf?: ClaimOf): Promise<number> {
  const { options, tried } = deps
  const due = (times: Map<number, number>, from: number) => {
    const now = Date.now()
    return [...times]
      .filter(([nonce, at]) => nonce >= from && now - Math.max(at, tried.get(nonce) ?? 0) >= options.afterMs)
      .sort(([a], [b]) => a - b)
  }
  if (due(await turns.unmined(), 0).length === 0) return 0
  const before = await minedCount(deps)
  if (before === undefined) return 0
  await turns.mined(before)
  if (due(await turns.unmined(), before).length === 0) return 0
  let turn: HeldTurn
  try {
    turn = await turns.take()
  } catch {
    return 0
  }
  try {
    // Read again under the turn: another replica may have raised one, and it mined, meanwhile.
    const mined = await minedCount(deps)
    if (mined === undefined) return 0
    await turns.mined(mined)
    for (const nonce of tried.keys()) if (nonce < mined) tried.delete(nonce)
    const sends = due(await turns.unmined(), mined)
    const kept = new Map<number, Hex>()
    for (const bytes of await turn.signedFrom(mined)) kept.set(parseTransaction(bytes).nonce!, bytes)
    let sent = 0
    for (const [nonce, at] of sends) {
      const current = kept.get(nonce)
      if (!current) continue
      if (!(await onChain(deps))) break
      if (await minedAlready(deps, current)) continue
      tried.set(nonce, Date.now())
      if (await replaceOne(deps, { nonce, at, current }, turn, claimOf)) sent++
    }
    return sent
  } finally {
    await turn.release().catch(() => {})
  }
}

/** Whether the node answers for the chain the key signs for; logged when not. */
function onChain(deps: UnminedDeps): Promise<boolean> {
  return answersForChain(
    deps.client,
    deps.chainId,
    deps.options.logger,
    'relayer RPC answers for another chain: unmined sends wait',
    {
      relayer: deps.account.address,
    },
  )
}

/**
 * The key's mined count, read between two answers that the node is the key's chain's; undefined
 * when either is not.
 */
async function minedCount(deps: UnminedDeps): Promise<number | undefined> {
  if (!(await onChain(deps))) return undefined
  const count = await deps.client.getTransactionCount({ address: deps.account.address, blockTag: 'latest' })
  return (await onChain(deps)) ? count : undefined
}

/** A send whose bytes have a receipt is mined, though a node behind counts its nonce unmined. */
async function minedAlready(deps: UnminedDeps, current: Hex): Promise<boolean> {
  const found = await deps.client
    .getTransactionReceipt({ hash: keccak256(current) })
    .then(() => true)
    .catch((error) => {
      if (error instanceof TransactionReceiptNotFoundError) return false
      throw error
    })
  if (found)
    deps.options.logger.info(
      { relayer: deps.account.address },
      'relayer send mined; a node counts it unmined',
    )
  return found
}

interface Unmined {
  nonce: number
  /** When it was broadcast or last signed again, unix ms. */
  at: number
  /** Its latest signed bytes. */
  current: Hex
}

async function replaceOne(deps: UnminedDeps, send: Unmined, turn: HeldTurn, claimOf?: ClaimOf) {
  const { account, client, options } = deps
  const { logger, maxFeePerGas } = options
  const { nonce, current } = send
  const relayer = account.address
  const tx = parseTransaction(current)
  const cancelled = isCancel(current, relayer)
  const record = cancelled || !tx.to ? undefined : claimOf?.({ to: tx.to, data: tx.data ?? '0x' })
  let replacement: Replacement
  try {
    replacement = await signReplacement(account, client, current, maxFeePerGas)
  } catch (error) {
    if (!(error instanceof AboveFeeCeiling)) throw error
    // Raised no further: cancelled once it can never move money. Its claim is asked by recording
    // the hash it holds again, which a claim no longer in flight refuses.
    const gone = record
      ? await record(keccak256(current)).then(
          () => false,
          () => true,
        )
      : options.cancelAfterMs !== undefined && Date.now() - send.at >= options.cancelAfterMs
    if (!cancelled && gone) return cancel(deps, send, turn)
    logger.warn(
      { relayer, nonce, neededWei: String(error.needed), ceilingWei: String(error.ceiling) },
      'relayer transaction unmined and not signed again: a higher fee is above SVC_RELAYER_MAX_FEE_GWEI',
    )
    await broadcast(client, current)
    return false
  }
  // A replacement the key cannot pay for is refused by every node; the old one stays out there.
  if (!(await affords(deps, replacement, nonce, current))) return false
  if (!(await turn.held())) return false
  if (record) {
    try {
      await record(replacement.txHash)
    } catch (error) {
      // Not recorded, so not sent: the claim is gone, and the send can never move money.
      logger.warn(
        { relayer, nonce, err: redactUrls(shortMessage(error)) },
        'relayer replacement not recorded: its claim is gone',
      )
      return cancel(deps, send, turn)
    }
  }
  const refused = await broadcast(client, replacement.rawTx)
  await turn.signedAgain(nonce, replacement.rawTx).catch(() => {})
  logger.info(
    { relayer, nonce, txHash: replacement.txHash, maxFeePerGas: String(replacement.maxFeePerGas), refused },
    'relayer transaction signed again with a higher fee',
  )
  return true
}

/** Replaces the send with a cancel at its nonce; the cancel's bytes are kept in its place. */
async function cancel(deps: UnminedDeps, send: Unmined, turn: HeldTurn): Promise<boolean> {
  const { account, client, options } = deps
  const { nonce, current } = send
  const relayer = account.address
  let signed: Replacement
  try {
    signed = await signCancel(account, client, current, options.maxFeePerGas)
  } catch (error) {
    if (!(error instanceof AboveFeeCeiling)) throw error
    options.logger.error(
      { relayer, nonce, neededWei: String(error.needed), ceilingWei: String(error.ceiling) },
      'relayer nonce blocked: its send can never move money, and a cancel costs more than SVC_RELAYER_MAX_FEE_GWEI allows; later sends wait until the base fee falls or the ceiling is raised',
    )
    await broadcast(client, current)
    return false
  }
  if (!(await affords(deps, signed, nonce, current))) return false
  if (!(await turn.held())) return false
  const refused = await broadcast(client, signed.rawTx)
  await turn.signedAgain(nonce, signed.rawTx).catch(() => {})
  options.logger.warn(
    {
      relayer,
      nonce,
      cancelled: keccak256(current),
      txHash: signed.txHash,
      maxFeePerGas: String(signed.maxFeePerGas),
      refused,
    },
    'relayer transaction cancelled: a transfer of nothing to itself at its nonce',
  )
  return true
}

async function affords(deps: UnminedDeps, signed: Replacement, nonce: number, current: Hex) {
  const relayer = deps.account.address
  if ((await deps.client.getBalance({ address: relayer })) >= signed.cost) return true
  deps.options.logger.warn({ relayer, nonce }, 'relayer key cannot pay a higher fee')
  await broadcast(deps.client, current)
  return false
}

/** Broadcasts; resolves with the node's refusal, if any. */
function broadcast(client: PublicClient, serialized: Hex): Promise<string | undefined> {
  return client
    .sendRawTransaction({ serializedTransaction: serialized })
    .then(() => undefined)
    .catch((error) => redactUrls(shortMessage(error)))
}
