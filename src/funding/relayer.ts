// The self-facilitator's sender: one relayer key, one transaction at a time. Sends are queued and
// nonces are managed here (parallel sends from one key would race for the same nonce). Each
// transaction is signed locally first, so its hash is known, and recorded through `onSigned`,
// before it is broadcast: a hash is never lost once money can move.
//
// The queue is per process; across replicas that may share the key, a send given the key's turns
// (sender-lock.ts) takes its turn and reads its nonce afresh. A key of one replica's own finds its
// turn free.
//
// A node keeps a transaction whose max fee fell under the base fee in its pool, unmined, and every
// later nonce of the key waits behind it. A send of this process still unmined after a while is
// signed again at its nonce with higher fees (replacement.ts), up to a ceiling; its new hash goes
// through the send's own `onSigned` before it is broadcast, so the claim follows whichever of the
// signings is mined.
import type { Logger } from 'pino'
import {
  type Account,
  type Chain,
  createWalletClient,
  type Hex,
  http,
  keccak256,
  type PrivateKeyAccount,
  type PublicClient,
  parseTransaction,
} from 'viem'
import { privateKeyToAccount } from 'viem/accounts'
import { redactUrls } from '../logger.ts'
import { AboveFeeCeiling, type Replacement, signReplacement } from './replacement.ts'
import type { HeldTurn, SendTurns } from './sender-lock.ts'

/** The transaction was refused before it was signed: nothing of it exists, no money moved. */
export class NotSent extends Error {}

export interface ReplaceOptions {
  /** How long a send may stay unmined before it is signed again with higher fees. */
  afterMs: number
  /** The highest max fee per gas (wei) a send is signed again at. */
  maxFeePerGas: bigint
  logger: Logger
}

/** A send of this process not seen mined yet: its latest signed bytes, since when, its recorder. */
interface Unmined {
  serialized: Hex
  since: number
  onSigned: (hash: Hex) => Promise<void>
}

export class Relayer {
  readonly account: PrivateKeyAccount
  private readonly wallet
  private tail: Promise<unknown> = Promise.resolve()
  private nextNonce: number | undefined
  /** By nonce; kept only given ReplaceOptions. */
  private readonly unmined = new Map<number, Unmined>()

  constructor(
    privateKey: Hex,
    private readonly client: PublicClient,
    chain: Chain,
    rpcUrl: string,
    private readonly replace?: ReplaceOptions,
  ) {
    this.account = privateKeyToAccount(privateKey)
    this.wallet = createWalletClient({ account: this.account, chain, transport: http(rpcUrl) })
  }

  /** Queues one call; resolves with its hash once broadcast. */
  send(
    call: { to: Hex; data: Hex },
    onSigned: (hash: Hex) => Promise<void>,
    turns?: SendTurns,
  ): Promise<Hex> {
    const run = this.tail.then(() => this.sendNow(call, onSigned, turns))
    this.tail = run.catch(() => {})
    return run
  }

  private async sendNow(
    call: { to: Hex; data: Hex },
    onSigned: (hash: Hex) => Promise<void>,
    turns: SendTurns | undefined,
  ): Promise<Hex> {
    if (!turns) return this.sendAt(call, onSigned, null)
    let turn: HeldTurn
    try {
      turn = await turns.take()
    } catch (error) {
      throw new NotSent(`relayer busy: ${(error as Error).message}`)
    }
    try {
      return await this.sendAt(call, onSigned, turn)
    } finally {
      await turn.release().catch(() => {})
    }
  }

  private async sendAt(
    call: { to: Hex; data: Hex },
    onSigned: (hash: Hex) => Promise<void>,
    turn: HeldTurn | null,
  ): Promise<Hex> {
    // Shared with other replicas, the count this process kept may be stale: read afresh, never
    // below the floor the last sender left.
    let nonce = turn ? undefined : this.nextNonce
    if (nonce === undefined) {
      const pending = await this.client.getTransactionCount({
        address: this.account.address,
        blockTag: 'pending',
      })
      if (turn && turn.floor > pending) await this.resend(turn, pending)
      nonce = Math.max(turn?.floor ?? 0, pending)
    }
    let serialized: Hex
    try {
      // Estimating gas runs the call: a transfer that would revert is refused here, unsent.
      const request = await this.wallet.prepareTransactionRequest({
        account: this.account as Account,
        to: call.to,
        data: call.data,
        nonce,
      })
      serialized = await this.account.signTransaction(
        request as Parameters<PrivateKeyAccount['signTransaction']>[0],
      )
    } catch (error) {
      throw new NotSent(`transaction refused before sending: ${shortMessage(error)}`)
    }
    // A turn that lapsed (this process paused past its life) may be another replica's now, at
    // this nonce: nothing recorded or sent yet, so refused unsent.
    if (turn && !(await turn.held())) throw new NotSent('the relayer key was taken by another sender')
    const hash = keccak256(serialized)
    await onSigned(hash)
    if (this.replace) this.unmined.set(nonce, { serialized, since: Date.now(), onSigned })
    try {
      await this.client.sendRawTransaction({ serializedTransaction: serialized })
    } catch {
      // Signed and recorded, it may be out there whatever the answer said: a node that took it
      // and lost its reply, or a mempool that passes it on. Only the chain can tell, so it is
      // answered as sent and waited for; the reconciler lets its claim go once it cannot be mined.
      // The node's nonce view is the truth after any refusal; read it again next time.
      this.nextNonce = undefined
      return hash
    }
    this.nextNonce = nonce + 1
    // Only a floor against a lagging count: a send it failed to note is sent all the same.
    await turn?.sent(nonce, serialized).catch(() => {})
    return hash
  }

  /**
   * Signs again, with higher fees, every send of this process unmined for `afterMs`, lowest nonce
   * first; resolves with how many replacements were sent. Queued with the sends, under the key's
   * turn when given one (skipped while another holds it: the next call tries again).
   */
  replaceUnmined(turns?: SendTurns): Promise<number> {
    const run = this.tail.then(() => this.replaceNow(turns))
    this.tail = run.catch(() => {})
    return run
  }

  private async replaceNow(turns: SendTurns | undefined): Promise<number> {
    const afterMs = this.replace?.afterMs
    if (afterMs === undefined || this.unmined.size === 0) return 0
    const mined = await this.client.getTransactionCount({ address: this.account.address, blockTag: 'latest' })
    for (const nonce of this.unmined.keys()) if (nonce < mined) this.unmined.delete(nonce)
    const due = [...this.unmined.entries()]
      .filter(([, send]) => Date.now() - send.since >= afterMs)
      .sort(([a], [b]) => a - b)
    if (due.length === 0) return 0
    let turn: HeldTurn | null = null
    if (turns) {
      try {
        turn = await turns.take()
      } catch {
        return 0
      }
    }
    try {
      // The bytes kept for a nonce are its latest signing by any sender (signed again for a gap).
      const kept = new Map<number, Hex>()
      for (const bytes of turn ? await turn.signedFrom(mined) : [])
        kept.set(parseTransaction(bytes).nonce!, bytes)
      let replaced = 0
      for (const [nonce, send] of due)
        if (await this.replaceOne(nonce, send, kept.get(nonce), turn)) replaced++
      return replaced
    } finally {
      await turn?.release().catch(() => {})
    }
  }

  private async replaceOne(nonce: number, send: Unmined, kept: Hex | undefined, turn: HeldTurn | null) {
    const { logger, maxFeePerGas } = this.replace!
    const relayer = this.account.address
    const current = kept && sameCall(kept, send.serialized) ? kept : send.serialized
    // Whatever happens now, the next try is `afterMs` away.
    send.since = Date.now()
    const again = () => this.client.sendRawTransaction({ serializedTransaction: current }).catch(() => {})
    let replacement: Replacement
    try {
      replacement = await signReplacement(this.account, this.client, current, maxFeePerGas)
    } catch (error) {
      if (!(error instanceof AboveFeeCeiling)) throw error
      logger.warn(
        { relayer, nonce, neededWei: String(error.needed), ceilingWei: String(error.ceiling) },
        'relayer transaction unmined and not signed again: a higher fee is above SVC_RELAYER_MAX_FEE_GWEI',
      )
      await again()
      return false
    }
    // A replacement the key cannot pay for is refused by every node; the old one stays out there.
    if ((await this.client.getBalance({ address: relayer })) < replacement.cost) {
      logger.warn({ relayer, nonce }, 'relayer key cannot pay a higher fee')
      await again()
      return false
    }
    if (turn && !(await turn.held())) return false
    try {
      await send.onSigned(replacement.txHash)
    } catch (error) {
      // Not recorded, so not sent (a claim no longer in flight refuses it).
      logger.warn(
        { relayer, nonce, err: redactUrls(shortMessage(error)) },
        'relayer replacement not recorded; not sent',
      )
      return false
    }
    send.serialized = replacement.rawTx
    const refused = await this.client
      .sendRawTransaction({ serializedTransaction: replacement.rawTx })
      .then(() => undefined)
      .catch((error) => redactUrls(shortMessage(error)))
    await turn?.signedAgain(nonce, replacement.rawTx).catch(() => {})
    logger.info(
      { relayer, nonce, txHash: replacement.txHash, maxFeePerGas: String(replacement.maxFeePerGas), refused },
      'relayer transaction signed again with a higher fee',
    )
    return true
  }

  /**
   * The node counts fewer than the floor: sends it does not hold (dropped from its pool, or not
   * seen yet), and every send above them waits. Their own signed bytes go out again: the same
   * transactions (the same hashes their claims recorded), so no authorization moves twice.
   */
  private async resend(turn: HeldTurn, from: number): Promise<void> {
    const kept = await turn.signedFrom(from).catch(() => [])
    for (const serialized of kept) {
      // already held or mined, or refused: the node's count says which on the next send
      await this.client.sendRawTransaction({ serializedTransaction: serialized }).catch(() => {})
    }
    await this.signAgain(turn, kept).catch(() => {})
  }

  /**
   * Bytes the node still lacks were refused: their fee fell under a base fee that rose since they
   * were signed. The same transaction (its nonce, call and gas) is signed at today's fees and kept
   * in their place; one nonce mines one of the two, and an authorization moves money once. Its
   * new hash is not the claim's: the reconciler finds the transfer by its authorization.
   */
  private async signAgain(turn: HeldTurn, kept: Hex[]): Promise<void> {
    const pendingCount = () =>
      this.client.getTransactionCount({ address: this.account.address, blockTag: 'pending' })
    for (let count = await pendingCount(); count < turn.floor; ) {
      const old = kept.map((bytes) => parseTransaction(bytes)).find((tx) => tx.nonce === count)
      if (!old?.to || old.gas === undefined) return
      const request = await this.wallet.prepareTransactionRequest({
        account: this.account as Account,
        to: old.to,
        data: old.data ?? '0x',
        value: old.value ?? 0n,
        gas: old.gas,
        nonce: count,
      })
      const serialized = await this.account.signTransaction(
        request as Parameters<PrivateKeyAccount['signTransaction']>[0],
      )
      // Lapsed, the turn is another sender's, who finds the same gap: left to it.
      if (!(await turn.held())) return
      await this.client.sendRawTransaction({ serializedTransaction: serialized })
      await turn.signedAgain(count, serialized)
      const next = await pendingCount()
      if (next <= count) return
      count = next
    }
  }
}

/** Two signings of one transaction: the same nonce, recipient and call. */
function sameCall(a: Hex, b: Hex): boolean {
  const [x, y] = [parseTransaction(a), parseTransaction(b)]
  return x.nonce === y.nonce && x.to?.toLowerCase() === y.to?.toLowerCase() && x.data === y.data
}

export function shortMessage(error: unknown): string {
  const e = error as { shortMessage?: string; message?: string }
  return (e?.shortMessage ?? e?.message ?? String(error)).split('\n')[0] as string
}
