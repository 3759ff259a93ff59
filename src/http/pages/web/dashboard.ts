// The buyer's dashboard: a pasted key (this tab's sessionStorage, sent as Bearer) reads the
// account, its spend, activity and keys, and sets the max price against the live capacity ladder.
import { barChart, COLORS } from './charts.ts'
import {
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
  when,
} from './common.ts'
import { keysPanel } from './dashboard-keys.ts'
import { pastedToken } from './session.ts'
import { webhooksPanel } from './webhooks-panel.ts'

interface Me {
  accountId: string
  wallet: string
  balances: { confirmedUsdc: string; pendingUsdc: string; heldUsdc: string }
  maxPriceCents: number
  activeApiKeyCount: number
  maxActiveApiKeys: number
}
interface Activity {
  supportReference: string
  model: string | null
  status: string
  costUsdc: string
  clearingPriceCents: number | null
  inputTokens: number | null
  outputTokens: number | null
  createdAt: string
}
interface Usage {
  costUsdc: string
  requests: number
  days: { date: string; costUsdc: string; requests: number; models: { model: string; costUsdc: string }[] }[]
}
interface Capacity {
  cheapestPostedCents: number | null
  prices: { priceCentsPerDollar: number; routableDiem: string; usdcToBuyAll: string }[]
}
interface RequestRecord {
  supportReference: string
  model: string | null
  status: string
  costUsdc: string
  clearingPriceCents: number | null
  burnDiem: string
  errorCode: string | null
  usage: { inputTokens: number; outputTokens: number; estimated: boolean } | null
  createdAt: string
  endedAt: string | null
  attempts: {
    attempt: number
    offerId: string | null
    outcome: string
    errorCode: string | null
    costUsdc: string
  }[]
}

const key = tabSecret('svc.dashboard.key')
const call = <T>(path: string, method = 'GET', body?: unknown) =>
  api<T>(path, { token: key.get(), method, body })
const status = byId('status')
let activityCursor: string | null = null
let maxPrice = 0
const showKeys = keysPanel(call)
const showWebhooks = webhooksPanel(call, '/v1/agent')

async function showBalances() {
  const me = await call<Me>('/v1/agent/me')
  maxPrice = me.maxPriceCents
  byId<HTMLInputElement>('max-price').value = String(me.maxPriceCents)
  fill(
    byId('balances'),
    facts([
      ['Confirmed', money(me.balances.confirmedUsdc)],
      ['Pending', money(me.balances.pendingUsdc)],
      ['Held', money(me.balances.heldUsdc)],
      ['Max price', cents(me.maxPriceCents)],
      ['Wallet', h('code', {}, me.wallet)],
      ['Account', h('code', {}, me.accountId)],
    ]),
  )
}

async function showLadder() {
  const capacity = await call<Capacity>('/v1/capacity')
  const rows = capacity.prices
  const eligible = rows.filter((row) => row.priceCentsPerDollar <= maxPrice)
  const note = byId('supply-note')
  if (rows.length > 0 && eligible.length === 0) {
    fill(
      note,
      h(
        'p',
        { class: 'warn', id: 'no-supply' },
        h('strong', {}, 'No eligible supply. '),
        `Every offer asks more than your max price of ${cents(maxPrice)}: the cheapest asks `,
        `${cents(capacity.cheapestPostedCents)}. Requests answer 503 no_eligible_supply until you raise `,
        `your max price to at least ${cents(capacity.cheapestPostedCents)} or a cheaper offer is posted.`,
      ),
    )
  } else if (rows.length === 0) {
    fill(note, h('p', { class: 'warn', id: 'no-supply' }, 'No capacity is routable right now at any price.'))
  } else {
    fill(
      note,
      h(
        'p',
        { id: 'max-marked' },
        `${eligible.length} of ${rows.length} asks are at or below your max price of ${cents(maxPrice)}: `,
        'green bars are within it, grey ones above.',
      ),
    )
  }
  const canvas = byId<HTMLCanvasElement>('depth-chart')
  barChart(
    canvas,
    rows.map((row) => cents(row.priceCentsPerDollar)),
    [
      {
        label: 'Routable DIEM',
        data: rows.map((row) => Number(row.routableDiem)),
        colors: rows.map((row) => (row.priceCentsPerDollar <= maxPrice ? COLORS[1]! : '#9ca3af')),
      },
    ],
    `Capacity by ask: ${rows.map((r) => `${diem(r.routableDiem)} at ${cents(r.priceCentsPerDollar)}`).join(', ') || 'none'}; your max is ${cents(maxPrice)}.`,
    (value) => diem(value),
  )
  fill(
    byId('depth-table'),
    table(
      'Capacity ladder',
      ['Ask', 'Routable', 'To buy all', 'Within your max'],
      rows.map((row) => [
        cents(row.priceCentsPerDollar),
        diem(row.routableDiem),
        money(row.usdcToBuyAll),
        row.priceCentsPerDollar <= maxPrice ? 'yes' : 'no',
      ]),
      'no routable capacity',
    ),
  )
}

async function showSpend() {
  const window = byId<HTMLSelectElement>('window').value
  const usage = await call<Usage>(`/v1/agent/usage?window=${encodeURIComponent(window)}`)
  const models = [...new Set(usage.days.flatMap((day) => day.models.map((m) => m.model)))].sort()
  fill(
    byId('spend-summary'),
    facts([
      ['Spent', money(usage.costUsdc)],
      ['Requests', count(usage.requests)],
    ]),
  )
  barChart(
    byId<HTMLCanvasElement>('spend-chart'),
    usage.days.map((day) =>
      new Date(`${day.date}T00:00:00Z`).toLocaleDateString(undefined, { timeZone: 'UTC' }),
    ),
    models.map((model) => ({
      label: model,
      data: usage.days.map((day) => Number(day.models.find((m) => m.model === model)?.costUsdc ?? 0)),
    })),
    `Spend per day by model: ${money(usage.costUsdc)} over the window.`,
    (value) => money(value),
    true,
  )
  const byModel = models.map((model) => {
    const total = usage.days.reduce(
      (sum, day) => sum + Number(day.models.find((m) => m.model === model)?.costUsdc ?? 0),
      0,
    )
    return [model, money(total)]
  })
  fill(byId('spend-models'), table('Spend by model', ['Model', 'Spent'], byModel, 'no spend in this window'))
}

function referenceButton(reference: string) {
  return h(
    'button',
    {
      type: 'button',
      class: 'quiet',
      onclick: () => showRecord(reference),
      'aria-label': `Record of ${reference}`,
    },
    reference,
  )
}

async function showActivity(more = false) {
  const query = more && activityCursor ? `&before=${encodeURIComponent(activityCursor)}` : ''
  const page = await call<{ data: Activity[]; nextCursor: string | null }>(
    `/v1/agent/activity?limit=20${query}`,
  )
  activityCursor = page.nextCursor
  byId('more-activity').hidden = page.nextCursor === null
  const rows = page.data.map((item) => [
    when(item.createdAt),
    item.model ?? '–',
    item.status,
    money(item.costUsdc),
    cents(item.clearingPriceCents),
    `${count(item.inputTokens)} / ${count(item.outputTokens)}`,
    referenceButton(item.supportReference),
  ])
  const target = byId('activity')
  const existing = target.querySelector('tbody')
  if (more && existing) {
    for (const cells of rows) existing.append(h('tr', {}, ...cells.map((cell) => h('td', {}, cell))))
    return
  }
  fill(
    target,
    table(
      'Activity',
      ['Ended', 'Model', 'Status', 'Cost', 'Price', 'Tokens in / out', 'Support reference'],
      rows,
    ),
  )
}

async function showRecord(reference: string) {
  const record = await call<RequestRecord>(`/v1/agent/requests/${encodeURIComponent(reference)}`)
  const section = byId('record-section')
  section.hidden = false
  fill(
    byId('record'),
    facts([
      ['Support reference', h('code', {}, record.supportReference)],
      ['Model', record.model ?? '–'],
      ['Status', record.status],
      ['Cost', money(record.costUsdc)],
      ['Clearing price', cents(record.clearingPriceCents)],
      ['Burn', diem(record.burnDiem)],
      [
        'Tokens in / out',
        record.usage
          ? `${count(record.usage.inputTokens)} / ${count(record.usage.outputTokens)}${record.usage.estimated ? ' (estimated)' : ''}`
          : '–',
      ],
      ['Error', record.errorCode ?? '–'],
      ['Started', when(record.createdAt)],
      ['Ended', when(record.endedAt)],
    ]),
    table(
      'Attempts',
      ['Attempt', 'Offer', 'Outcome', 'Error', 'Cost'],
      record.attempts.map((a) => [
        a.attempt,
        a.offerId ?? '–',
        a.outcome,
        a.errorCode ?? '–',
        money(a.costUsdc),
      ]),
    ),
  )
  section.focus()
}

async function showAll() {
  await showBalances()
  await Promise.all([showLadder(), showSpend(), showActivity(), showKeys(), showWebhooks()])
}

pastedToken({
  secret: key,
  input: 'api-key',
  content: 'account',
  focus: 'balances-title',
  what: 'key',
  check: showBalances,
  showAll,
})

onSubmit(byId<HTMLFormElement>('price-form'), byId('price-status'), async (data) => {
  const cents = Number(data.get('maxPriceCents'))
  await call('/v1/agent/max-price', 'PATCH', { maxPriceCents: cents })
  await showBalances()
  await showLadder()
  say(byId('price-status'), `Max price saved: ${cents}¢ per dollar.`)
})

byId('window').addEventListener('change', () => showSpend().catch((e) => say(status, String(e), 'alert')))
byId('more-activity').addEventListener('click', () =>
  showActivity(true).catch((e) => say(status, String(e), 'alert')),
)
