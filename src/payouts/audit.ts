// The audit's payout checks (composed by `svc-gateway audit`, cli/audit.ts). Per supplier: pending is the sum of its
// open payouts (sending, pending), paid out the sum of its confirmed ones, and the open set holds
// exactly the open payouts. With --chain: every confirmed payout's receipt is on chain and holds
// the USDC Transfer(payout wallet -> supplier wallet, amount). A payout re-signed with a higher fee
// has several hashes at one nonce: the transfer may be any of them, and only that one is mined.
// A receipt counts only while its block is the chain's at its height: a node still on a fork a
// reorg left answers the receipt it holds there, for a transfer the chain no longer has.
import type { Address, Hex } from 'viem'
import { type FundingChain, hasTransfer, type Receipt } from '../funding/chain.ts'
import type { Keyspace } from '../redis/keys.ts'
import type { Store } from '../redis/store.ts'
import { type Payout, PayoutStore } from './store.ts'

export interface PayoutFinding {
  subject: string
  problem: string
}

const isOpen = (p: Payout) => p.state === 'sending' || p.state === 'pending'

async function supplierPayouts(store: Store, keys: Keyspace, supplierId: string): Promise<Payout[]> {
  return new PayoutStore(store, keys).many(await store.zrange(keys.supplierPayouts(supplierId), 0, -1))
}

/** The supplier's payouts against its pending and paid out (micro-USDC, from its hash). */
export async function auditSupplierPayouts(
  store: Store,
  keys: Keyspace,
  supplierId: string,
  pending: number,
  paidOut: number,
): Promise<PayoutFinding[]> {
  const findings: PayoutFinding[] = []
  const subject = `supplier ${supplierId}`
  const payouts = await supplierPayouts(store, keys, supplierId)
  const sum = (list: Payout[]) => list.reduce((total, p) => total + p.amount, 0)
  const open = sum(payouts.filter(isOpen))
  const confirmed = sum(payouts.filter((p) => p.state === 'confirmed'))
  if (open !== pending) findings.push({ subject, problem: `pending ${pending} != its open payouts' ${open}` })
  if (confirmed !== paidOut) {
    findings.push({ subject, problem: `paid out ${paidOut} != its confirmed payouts' ${confirmed}` })
  }
  for (const p of payouts) {
    const listed = (await store.zscore(keys.payoutsOpen, p.id)) !== null
    if (p.supplierId !== supplierId)
      findings.push({ subject: `payout ${p.id}`, problem: `names supplier ${p.supplierId}` })
    if (listed !== isOpen(p)) {
      findings.push({
        subject: `payout ${p.id}`,
        problem: `${p.state} but ${listed ? '' : 'not '}in the open set`,
      })
    }
  }
  return findings
}

/**
 * Every confirmed payout's transfer, read from its receipt on chain; and every failed payout that
 * was signed, none of whose transactions may have succeeded (its amount was made payable again).
 */
export async function auditPayoutsOnChain(
  store: Store,
  keys: Keyspace,
  chain: FundingChain,
  token: Address,
): Promise<{ checked: number; findings: PayoutFinding[] }> {
  const findings: PayoutFinding[] = []
  let checked = 0
  for (const supplierId of await store.smembers(keys.suppliers)) {
    for (const p of await supplierPayouts(store, keys, supplierId)) {
      if (p.state === 'failed' && p.hashes.length > 0) {
        checked++
        for (const hash of p.hashes) {
          if ((await chain.receiptOnChain(hash))?.status === 'success') {
            findings.push({
              subject: `payout ${p.id}`,
              problem: `failed, but its transaction ${hash} succeeded on chain`,
            })
          }
        }
        continue
      }
      if (p.state !== 'confirmed') continue
      checked++
      const subject = `payout ${p.id}`
      const mined: { hash: Hex; receipt: Receipt }[] = []
      for (const hash of p.hashes) {
        const receipt = await chain.receiptOnChain(hash)
        if (receipt) mined.push({ hash, receipt })
      }
      const paid = mined.find((m) => m.receipt.status === 'success')
      if (!paid) {
        findings.push({
          subject,
          problem: `confirmed but none of its transactions [${p.hashes.join(', ')}] is a success on chain`,
        })
      } else if (
        !hasTransfer(paid.receipt, token, (p.from ?? '') as Address, p.wallet as Address, BigInt(p.amount))
      ) {
        findings.push({
          subject,
          problem: `its transaction ${paid.hash} holds no transfer of ${p.amount} from ${p.from} to ${p.wallet}`,
        })
      } else if (mined.length !== 1 || paid.hash !== p.txHash) {
        findings.push({
          subject,
          problem: `its mined transactions are [${mined.map((m) => m.hash).join(', ')}], its record ${p.txHash}`,
        })
      }
    }
  }
  return { checked, findings }
}

/** Every supplier's payouts against its pending and paid out. */
export async function auditPayouts(store: Store, keys: Keyspace): Promise<PayoutFinding[]> {
  const findings: PayoutFinding[] = []
  for (const id of await store.smembers(keys.suppliers)) {
    const [pending, paidOut] = await store.hmget(keys.supplier(id), 'pending', 'paidOut')
    findings.push(
      ...(await auditSupplierPayouts(store, keys, id, Number(pending ?? 0), Number(paidOut ?? 0))),
    )
  }
  return findings
}
