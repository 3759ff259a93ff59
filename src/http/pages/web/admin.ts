// The operator's page: with the admin token (this tab's sessionStorage, sent as Bearer) it shows
// health, the market's totals, the ladder and its offers, suppliers (suspend, reinstate), payouts
// in flight, and an account found by id or wallet, with a hand credit (with an Idempotency-Key).
import { barChart } from './charts.ts'
import {
  actionButton,
  api,
  byId,
  cents,
  count,
  diem,
  facts,
  fill,
  h,
  money,
  onSubmit,
  say,
  table,
  tabSecret,
  txLink,
  when,
} from './common.ts'
import { pastedToken } from './session.ts'

interface Offer {
  id: string
  supplierId: string | null
  supplier: string | null
  askCents: number
  status: string
  capacityDiem: string
  burnedDiem: string
  heldDiem: string
  inFlight: number
  earnedUsdc: string
  disputedDiem: string
}
interface Supplier {
  supplierId: string
  wallet: string
  status: string
  offerCount: number
  earnedUsdc: string
  paidOutUsdc: string
  payoutPendingUsdc: string
  payableUsdc: string
}
interface Account {
  accountId: string
  wallet: string
  createdAt: string
  maxPriceCents: number
  activeApiKeyCount: number
  balances: Record<
    'confirmedUsdc' | 'pendingUsdc' | 'heldUsdc' | 'spentUsdc' | 'fundedUsdc' | 'writtenOffUsdc',
    string
  >
}

const token = tabSecret('svc.admin.token')
const call = <T>(path: string, method = 'GET', body?: unknown, headers?: Record<string, string>) =>
  api<T>(path, { token: token.get(), method, body, headers })
let shownAccount: string | null = null
// The credit sent and not yet answered, with its Idempotency-Key: the same credit sent again (its
// answer lost) carries the same key, so the gateway adds it once.
let unanswered: { account: string; amount: string; note: string; key: string } | null = null

async function showHealth() {
  const health = await call<{
    redis: { status: string; pingMs: number }
    replicas: {
      seenWithinSeconds: number
      count: number
      data: { id: string; lastSeenAt: string; earlierBuild: boolean }[]
    }
    reaper: { lastRunAt: string; replica: string; reaped: number } | null
  }>('/admin/v1/health')
  fill(
    byId('health'),
    facts([
      ['Redis', `${health.redis.status} (${health.redis.pingMs} ms)`],
      [`Replicas seen (${health.replicas.seenWithinSeconds} s)`, count(health.replicas.count)],
      ['Reaper ran', health.reaper ? when(health.reaper.lastRunAt) : 'never'],
      ['Reaped then', health.reaper ? count(health.reaper.reaped) : '–'],
    ]),
    table(
      'Replicas',
      ['Replica', 'Last seen', 'Build'],
      health.replicas.data.map((r) => [
        h('code', {}, r.id),
        when(r.lastSeenAt),
        r.earlierBuild ? 'earlier' : 'current',
      ]),
    ),
  )
}

async function showTotals() {
  const t = await call<Record<string, string>>('/admin/v1/market')
  fill(
    byId('totals'),
    facts([
      ['Buyer spend', money(t.spentUsdc!)],
      ['Supplier earnings', money(t.earnedUsdc!)],
      ['Fees', money(t.feesUsdc!)],
      ['Written off', money(t.writtenOffUsdc!)],
      ['Disputed burn', diem(t.disputedBurnDiem!)],
    ]),
  )
}

async function showLadder() {
  const [capacity, offers] = await Promise.all([
    call<{ prices: { priceCentsPerDollar: number; routableDiem: string }[] }>('/v1/capacity'),
    call<{ data: Offer[] }>('/admin/v1/offers'),
  ])
  const rows = capacity.prices
  barChart(
    byId<HTMLCanvasElement>('depth-chart'),
    rows.map((r) => cents(r.priceCentsPerDollar)),
    [{ label: 'Routable DIEM', data: rows.map((r) => Number(r.routableDiem)) }],
    `Ladder depth: ${rows.map((r) => `${diem(r.routableDiem)} at ${cents(r.priceCentsPerDollar)}`).join(', ') || 'empty'}.`,
    (value) => diem(value),
  )
  const live = offers.data.filter((o) => o.status !== 'deleted')
  fill(
    byId('offers'),
    table(
      'Offers',
      ['Offer', 'Supplier', 'Ask', 'Status', 'Capacity', 'Burned', 'Held', 'In flight', 'Earned', 'Disputed'],
      live.map((o) => [
        h('code', {}, o.id),
        o.supplierId ?? o.supplier ?? '–',
        cents(o.askCents),
        o.status,
        diem(o.capacityDiem),
        diem(o.burnedDiem),
        diem(o.heldDiem),
        count(o.inFlight),
        money(o.earnedUsdc),
        diem(o.disputedDiem),
      ]),
      'no offers',
    ),
  )
}

function statusButton(s: Supplier) {
  const next = s.status === 'active' ? 'suspended' : 'active'
  const verb = next === 'suspended' ? 'Suspend' : 'Reinstate'
  return actionButton(verb, `${verb} ${s.supplierId}`, byId('suppliers-status'), async () => {
    await call(`/admin/v1/suppliers/${encodeURIComponent(s.supplierId)}`, 'PATCH', { status: next })
    await Promise.all([showSuppliers(), showLadder()])
    say(byId('suppliers-status'), `${s.supplierId} is now ${next}.`)
  })
}

async function showSuppliers() {
  const suppliers = (await call<{ data: Supplier[] }>('/admin/v1/suppliers')).data
  fill(
    byId('suppliers'),
    table(
      'Suppliers',
      ['Supplier', 'Wallet', 'Status', 'Offers', 'Earned', 'Paid out', 'Pending', 'Payable', 'Action'],
      suppliers.map((s) => [
        h('code', {}, s.supplierId),
        h('code', {}, s.wallet),
        s.status,
        count(s.offerCount),
        money(s.earnedUsdc),
        money(s.paidOutUsdc),
        money(s.payoutPendingUsdc),
        money(s.payableUsdc),
        statusButton(s),
      ]),
      'no suppliers',
    ),
  )
}

async function showPayouts() {
  const open = (
    await call<{
      data: {
        id: string
        supplierId: string
        amountUsdc: string
        state: string
        txHash: string | null
        createdAt: string
      }[]
    }>('/admin/v1/payouts')
  ).data
  const total = open.reduce((sum, p) => sum + Math.round(Number(p.amountUsdc) * 1e6), 0)
  fill(
    byId('payouts'),
    facts([['In flight', money(total / 1e6)]]),
    table(
      'Payouts in flight',
      ['Requested', 'Supplier', 'Amount', 'State', 'Transaction'],
      open.map((p) => [
        when(p.createdAt),
        h('code', {}, p.supplierId),
        money(p.amountUsdc),
        p.state,
        txLink(p.txHash),
      ]),
      'none in flight',
    ),
  )
}

async function showAccount(lookup: string) {
  const path = lookup.startsWith('0x')
    ? `/admin/v1/accounts?wallet=${encodeURIComponent(lookup)}`
    : `/admin/v1/accounts/${encodeURIComponent(lookup)}`
  const account = await call<Account>(path)
  shownAccount = account.accountId
  const b = account.balances
  fill(
    byId('account'),
    facts([
      ['Account', h('code', {}, account.accountId)],
      ['Wallet', h('code', {}, account.wallet)],
      ['Confirmed', money(b.confirmedUsdc)],
      ['Pending', money(b.pendingUsdc)],
      ['Held', money(b.heldUsdc)],
      ['Spent', money(b.spentUsdc)],
      ['Funded', money(b.fundedUsdc)],
      ['Written off', money(b.writtenOffUsdc)],
      ['Max price', cents(account.maxPriceCents)],
      ['Active keys', count(account.activeApiKeyCount)],
      ['Opened', when(account.createdAt)],
    ]),
  )
  byId('credit-form').hidden = false
}

async function showAll() {
  await showHealth()
  await Promise.all([showTotals(), showLadder(), showSuppliers(), showPayouts()])
}

pastedToken({
  secret: token,
  input: 'admin-token',
  content: 'console',
  focus: 'health-title',
  what: 'token',
  check: showHealth,
  showAll,
})
byId('refresh').addEventListener('click', () =>
  showAll().then(
    () => say(byId('status'), `Refreshed at ${new Date().toLocaleTimeString()}.`),
    (error) => say(byId('status'), String(error), 'alert'),
  ),
)

onSubmit(byId<HTMLFormElement>('lookup-form'), byId('account-status'), async (data) => {
  await showAccount(String(data.get('lookup') ?? '').trim())
  say(byId('account-status'), '')
})

onSubmit(byId<HTMLFormElement>('credit-form'), byId('account-status'), async (data) => {
  if (!shownAccount) return
  const amount = String(data.get('amountUsdc') ?? '').trim()
  const note = String(data.get('note') ?? '')
  const same =
    unanswered?.account === shownAccount && unanswered.amount === amount && unanswered.note === note
  const key = same && unanswered ? unanswered.key : crypto.randomUUID()
  unanswered = { account: shownAccount, amount, note, key }
  await call(
    `/admin/v1/accounts/${encodeURIComponent(shownAccount)}/credit`,
    'POST',
    { amountUsdc: amount, note },
    { 'idempotency-key': key },
  )
  unanswered = null
  await showAccount(shownAccount)
  byId<HTMLFormElement>('credit-form').reset()
  say(byId('account-status'), `Credited ${money(amount)} to ${shownAccount}.`)
})
