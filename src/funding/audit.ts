// The audit's funding checks (composed by `svc-gateway audit`, cli/audit.ts). An account's funded
// is what it was ever given: its credited payments and the operator's credits by hand, each kept
// where the step that moved the money wrote it (the payment's record, the audit Stream's entry).
// On one slot its pending is its payments still pending (held apart, audit-apart.ts checks that on
// the account's own list). Each credited payment's authorization says credited, by that payment: an
// authorization released or claimed again could move the same money twice. With --chain, every
// credited payment's transaction is read back: a success holding the payer's transfer of that
// amount to the gateway's wallet that used the payment's own authorization, still on chain.
import type { Address, Hex } from 'viem'
import { type AuditFinding, marketGlob, scanHashes } from '../market/audit.ts'
import type { Keyspace } from '../redis/keys.ts'
import type { Store } from '../redis/store.ts'
import { forEachEntry } from '../redis/streams.ts'
import { type FundingChain, hasTransfer, settlesAuthorization } from './chain.ts'

const AMOUNT = /^[1-9]\d{0,14}$/

/** Every credited payment's record. */
const paymentsOf = (store: Store, keys: Keyspace) =>
  scanHashes(store, marketGlob(keys.prefix, 'x402:payment:*'))

/** The operator's credits by hand, by account, from the audit Streams they were written to. */
async function creditsByHand(
  store: Store,
  keys: Keyspace,
  accountIds: string[],
): Promise<Map<string, number>> {
  const credits = new Map<string, number>()
  const read = (stream: string) =>
    forEachEntry(store, stream, (flat) => {
      const entry: Record<string, string> = {}
      for (let i = 0; i + 1 < flat.length; i += 2) entry[flat[i]!] = flat[i + 1]!
      if (entry.action !== 'credit' || !entry.accountId) return
      credits.set(entry.accountId, (credits.get(entry.accountId) ?? 0) + Number(entry.amountMicroUsdc ?? 0))
    })
  // An account moved apart keeps its earlier credits in the market's Stream, its later in its own.
  await read(keys.audit)
  if (keys.layout === 'apart') for (const id of accountIds) await read(keys.auditOf(id))
  return credits
}

/** What each listed account was given: its credited payments, those still pending, its credits by hand. */
export interface Given {
  accountIds: string[]
  paid: Map<string, number>
  pending: Map<string, number>
  byHand: Map<string, number>
}

/** What each account was given, naming through `off` each payment record that is off. */
export async function givenToAccounts(
  store: Store,
  keys: Keyspace,
  off: (subject: string, problem: string) => void = () => {},
): Promise<Given> {
  const apart = keys.layout === 'apart'
  const accountIds = await store.smembers(keys.accounts)
  const listed = new Set(accountIds)
  const paid = new Map<string, number>()
  const pending = new Map<string, number>()
  const add = (map: Map<string, number>, id: string, amount: number) =>
    map.set(id, (map.get(id) ?? 0) + amount)
  for (const p of await paymentsOf(store, keys)) {
    const subject = `payment ${p.id}`
    if (!AMOUNT.test(p.amount ?? '')) {
      off(subject, `amount is not a positive integer: ${p.amount}`)
      continue
    }
    if (!p.accountId || !listed.has(p.accountId)) {
      off(subject, `credits account ${p.accountId}, which is not listed`)
      continue
    }
    const [state, by] = await store.hmget(keys.authorization(p.authorization ?? ''), 'state', 'paymentId')
    if (state !== 'credited' || by !== p.id)
      off(subject, `its authorization ${p.authorization} is ${state ?? 'missing'}${by ? ` by ${by}` : ''}`)
    // Held apart, a payment moves its account's money once listed there, pending or confirmed
    // (audit-apart.ts checks the listing).
    if (apart) {
      const listing = await store.hget(keys.accountPayments(p.accountId), p.id!)
      if (listing !== 'pending' && listing !== 'confirmed') continue
    }
    add(paid, p.accountId, Number(p.amount))
    if (p.state === 'pending') add(pending, p.accountId, Number(p.amount))
  }
  return { accountIds, paid, pending, byHand: await creditsByHand(store, keys, accountIds) }
}

/** An account's funded against what it was given, as the audit words it. */
export const fundedProblem = (funded: string | null | undefined, given: Given, id: string) =>
  `funded ${funded} != its credited payments ${given.paid.get(id) ?? 0} + credits by hand ${given.byHand.get(id) ?? 0}`

export async function auditFunding(store: Store, keys: Keyspace): Promise<AuditFinding[]> {
  const findings: AuditFinding[] = []
  const off = (subject: string, problem: string) => findings.push({ subject, problem })
  const apart = keys.layout === 'apart'
  const given = await givenToAccounts(store, keys, off)
  const { accountIds, paid, pending, byHand } = given
  const listed = new Set(accountIds)
  for (const id of accountIds) {
    const [funded, pendingNow] = await store.hmget(keys.account(id), 'funded', 'pending')
    if (funded === null) continue // the market's audit names a listed account without a hash
    const subject = `account ${id}`
    if (Number(funded) !== (paid.get(id) ?? 0) + (byHand.get(id) ?? 0))
      off(subject, fundedProblem(funded, given, id))
    if (!apart && Number(pendingNow ?? 0) !== (pending.get(id) ?? 0))
      off(subject, `pending ${pendingNow} != its payments pending ${pending.get(id) ?? 0}`)
  }
  for (const id of byHand.keys()) if (!listed.has(id)) off(`account ${id}`, 'credited by hand but not listed')
  return findings
}

/**
 * Every credited payment of this chain read back from its receipt: a success, still on chain,
 * holding the USDC transfer of its amount from its payer to `payTo`. Payments of another chain
 * are counted apart, not read.
 */
export async function auditFundingOnChain(
  store: Store,
  keys: Keyspace,
  chain: FundingChain,
  chainId: number,
  token: Address,
  payTo: Address,
): Promise<{ checked: number; elsewhere: number; findings: AuditFinding[] }> {
  const findings: AuditFinding[] = []
  let checked = 0
  let elsewhere = 0
  for (const p of await paymentsOf(store, keys)) {
    // Either shape of payment id names its chain first, its transaction second.
    const [onChain, transaction] = (p.id ?? '').split(':')
    if (Number(onChain) !== chainId) {
      elsewhere++
      continue
    }
    checked++
    const subject = `payment ${p.id}`
    if (!AMOUNT.test(p.amount ?? '')) {
      off(subject, `amount is not a positive integer: ${p.amount}`)
      continue
    }
    const receipt = await chain.receipt(transaction as Hex)
    if (!receipt) off(subject, `${p.state}, but its transaction is not on chain`)
    else if (receipt.status !== 'success') off(subject, `${p.state}, but its transaction reverted`)
    else if (!hasTransfer(receipt, token, (p.payer ?? '') as Address, payTo, BigInt(p.amount!)))
      off(subject, `its transaction holds no transfer of ${p.amount} from ${p.payer} to ${payTo}`)
    else if (!settlesAuthorization(receipt, token, authorizationOf(p), payTo))
      off(subject, `its transaction did not use its authorization ${p.authorization}`)
  }
  return { checked, elsewhere, findings }

  function off(subject: string, problem: string) {
    findings.push({ subject, problem })
  }
}

/** A credited payment's authorization, from its record (the nonce ends the authorization id). */
function authorizationOf(p: Record<string, string>) {
  const nonce = (p.authorization ?? '').split(':')[3] ?? ''
  return { from: (p.payer ?? '') as Address, nonce: nonce as Hex, value: BigInt(p.amount!) }
}
