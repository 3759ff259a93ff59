// The self-facilitator's sender: one relayer key, one transaction at a time. Sends are queued and
// nonces are managed here (parallel sends from one key would race for the same nonce). Each
// transaction is signed locally first, so its hash is known, and recorded through `onSigned`,
// before it is broadcast: a hash is never lost once money can move.
//
// The queue is per process; across replicas that may share the key, a send given the key's turns
// (sender-lock.ts) takes its turn and reads its nonce afresh. A key of one replica's own finds its
// turn free.
//
// A send left unmined (a node holds it under a base fee that rose past its fee) is signed again
// with higher fees, or cancelled, by whichever replica holds the key's turn (unmined.ts).
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
import { shortMessage } from '../logger.ts'
import { answersForChain } from './on-chain.ts'
import type { HeldTurn, SendTurns } from './sender-lock.ts'
import { type ClaimOf, type ReplaceOptions, replaceDue } from './unmined.ts'

/** The transaction was refused before it was signed: nothing of it exists, no money moved. */
export class NotSent extends Error {}

export class Relayer {
  readonly account: PrivateKeyAccount
  private readonly wallet
  private readonly chainId: number
  private tail: Promise<unknown> = Promise.resolve()
  private nextNonce: number | undefined
  /** When this process last tried to raise each unmined nonce. */
  private readonly tried = new Map<number, number>()

  constructor(
    privateKey: Hex,
    private readonly client: PublicClient,
    chain: Chain,
    rpcUrl: string,
    private readonly replace?: ReplaceOptions,
  ) {
    this.account = privateKeyToAccount(privateKey)
    this.chainId = chain.id
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
      const pending = await this.pendingCount()
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
    try {
      await this.client.sendRawTransaction({ serializedTransaction: serialized })
    } catch {
      // Signed and recorded, it may be out there whatever the answer said: a node that took it
      // and lost its reply, or a mempool that passes it on. Only the chain can tell, so it is
      // answered as sent and waited for; the reconciler lets its claim go once it cannot be mined.
      // The node's nonce view is the truth after any refusal; read it again next time. Kept as
      // unmined: if it is out there and stays unmined, it is raised like any other.
      this.nextNonce = undefined
      await turn?.signedAgain(nonce, serialized).catch(() => {})
      return hash
    }
    this.nextNonce = nonce + 1
    // Only a floor against a lagging count: a send it failed to note is sent all the same.
    await turn?.sent(nonce, serialized).catch(() => {})
    return hash
  }

  /**
   * The key's pending count, read between two answers that the node is the chain's: another
   * chain's count is a nonce already mined here, or one past a gap every later send waits behind.
   */
  private async pendingCount(): Promise<number> {
    const what = 'relayer RPC answers for another chain: the send is refused unsigned'
    const onChain = () => answersForChain(this.client, this.chainId, this.replace?.logger, what)
    if (!(await onChain())) throw new NotSent('the relayer RPC answers for another chain')
    const pending = await this.client.getTransactionCount({
      address: this.account.address,
      blockTag: 'pending',
    })
    if (!(await onChain())) throw new NotSent('the relayer RPC answers for another chain')
    return pending
  }

  /**
   * Signs again with higher fees, or cancels, every send of the key left unmined (unmined.ts),
   * whichever replica sent it; `claimOf` records a replacement's hash on its claim. Queued with this
   * process's sends.
   */
  replaceUnmined(turns: SendTurns, claimOf?: ClaimOf): Promise<number> {
    const replace = this.replace
    if (!replace) return Promise.resolve(0)
    const deps = {
      account: this.account,
      client: this.client,
      options: replace,
      tried: this.tried,
      chainId: this.chainId,
    }
    const run = this.tail.then(() => replaceDue(deps, turns, claimOf))
    this.tail = run.catch(() => {})
    return run
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
    const pendingCount = () => this.pendingCount()
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
