// The supplier's payouts: a request for an amount (with an Idempotency-Key, kept until an answer
// comes, so a click retried after a lost answer never pays twice) and the history, each transaction linked on the configured network's explorer.
import { byId, fill, money, onSubmit, say, table, txLink, when } from './common.ts'

type Call = <T>(path: string, method?: string, body?: unknown, headers?: Record<string, string>) => Promise<T>

interface Payout {
  id?: string
  state: string
  amountUsdc: string
  txHash: string | null
  createdAt: string
}

/** Wires the payouts panel to `call`; returns what redraws it. */
export function payoutsPanel(call: Call, changed: () => Promise<void>): () => Promise<void> {
  const status = byId('payouts-status')

  async function show() {
    const payouts = (await call<{ data: Payout[] }>('/v1/supplier/payouts?limit=50')).data
    fill(
      byId('payouts'),
      table(
        'Payout history',
        ['Requested', 'Amount', 'State', 'Transaction'],
        payouts.map((p) => [when(p.createdAt), money(p.amountUsdc), p.state, txLink(p.txHash)]),
        'no payouts yet',
      ),
    )
  }

  // A request whose answer never came (the network, a timeout) may have been made: the same amount
  // asked again goes under the same key, so the gateway answers that payout instead of a second.
  let unanswered: { amount: string; key: string } | null = null
  onSubmit(byId<HTMLFormElement>('payout-form'), status, async (data) => {
    const amount = String(data.get('amountUsdc') ?? '').trim()
    const key = unanswered?.amount === amount ? unanswered.key : crypto.randomUUID()
    unanswered = { amount, key }
    const payout = await call<Payout>(
      '/v1/supplier/payouts',
      'POST',
      { amountUsdc: amount },
      { 'idempotency-key': key },
    )
    unanswered = null
    byId<HTMLFormElement>('payout-form').reset()
    await show()
    await changed()
    say(status, `Payout of ${money(payout.amountUsdc)} requested: ${payout.state}.`)
  })
  return show
}
