// The supplier's page: Sign-In with Ethereum from an injected wallet (EIP-1193: the wallet signs
// an EIP-4361 message with personal_sign), then with the `sup_` key it gave (this tab's
// sessionStorage, sent as Bearer) the supplier's earnings, offers, fills, earnings per day and payouts.
import { getAddress, stringToHex } from 'viem'
import { createSiweMessage } from 'viem/siwe'
import { barChart } from './charts.ts'
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
  say,
  table,
  tabSecret,
  when,
} from './common.ts'
import { forgetView, resume, showSignedIn } from './session.ts'
import { offersPanel } from './supplier-offers.ts'
import { payoutsPanel } from './supplier-payouts.ts'
import { webhooksPanel } from './webhooks-panel.ts'

interface Fill {
  createdAt: string
  model: string | null
  offerId: string
  burnDiem: string
  clearingPriceCents: number
  earnedUsdc: string
}
interface Eip1193 {
  request(args: { method: string; params?: unknown[] }): Promise<unknown>
}

const key = tabSecret('svc.supplier.key')
const keyId = tabSecret('svc.supplier.keyId')
const call = <T>(path: string, method = 'GET', body?: unknown, headers?: Record<string, string>) =>
  api<T>(path, { token: key.get(), method, body, headers })
let fillsCursor: string | null = null

async function showMe() {
  const me = await call<{
    supplierId: string
    wallet: string
    status: string
    earnedUsdc: string
    paidOutUsdc: string
    payoutPendingUsdc: string
    payableUsdc: string
  }>('/v1/supplier/me')
  fill(
    byId('me'),
    facts([
      ['Earned', money(me.earnedUsdc)],
      ['Paid out', money(me.paidOutUsdc)],
      ['Payout pending', money(me.payoutPendingUsdc)],
      ['Payable', money(me.payableUsdc)],
      ['Status', me.status],
      ['Wallet', h('code', { id: 'wallet' }, me.wallet)],
      ['Supplier', h('code', {}, me.supplierId)],
    ]),
  )
}

function fillRow(f: Fill) {
  return [
    when(f.createdAt),
    f.model ?? '–',
    h('code', {}, f.offerId),
    diem(f.burnDiem),
    cents(f.clearingPriceCents),
    money(f.earnedUsdc),
  ]
}

async function showFills(more = false) {
  const query = more && fillsCursor ? `&before=${encodeURIComponent(fillsCursor)}` : ''
  const page = await call<{ data: Fill[]; nextCursor: string | null }>(`/v1/supplier/fills?limit=50${query}`)
  fillsCursor = page.nextCursor
  byId('more-fills').hidden = page.nextCursor === null
  const existing = byId('fills').querySelector('tbody')
  if (more && existing) {
    for (const cells of page.data.map(fillRow))
      existing.append(h('tr', {}, ...cells.map((c) => h('td', {}, c))))
    return
  }
  fill(
    byId('fills'),
    table(
      'Fills',
      ['Time', 'Model', 'Offer', 'Burn', 'Price', 'Earned'],
      page.data.map(fillRow),
      'no fills yet',
    ),
  )
}

interface Earnings {
  earnedUsdc: string
  fills: number
  days: { date: string; earnedUsdc: string; fills: number }[]
}

/** Earnings per UTC day over 30 days (the days the gateway sums them in, as the buyer's spend). */
async function showDaily() {
  const earnings = await call<Earnings>('/v1/supplier/earnings?window=30d')
  const label = (date: string) =>
    new Date(`${date}T00:00:00Z`).toLocaleDateString(undefined, { timeZone: 'UTC' })
  barChart(
    byId<HTMLCanvasElement>('daily-chart'),
    earnings.days.map((day) => label(day.date)),
    [{ label: 'Earned', data: earnings.days.map((day) => Number(day.earnedUsdc)) }],
    `Earnings per day: ${money(earnings.earnedUsdc)} from ${earnings.fills} fills over 30 days.`,
    (value) => money(value),
  )
  const sold = earnings.days.filter((day) => day.fills > 0).reverse()
  fill(
    byId('daily'),
    table(
      'Earnings per day',
      ['Day (UTC)', 'Fills', 'Earned'],
      sold.map((day) => [label(day.date), count(day.fills), money(day.earnedUsdc)]),
      'no fills in 30 days',
    ),
  )
}

const refreshMoney = async () => {
  await showMe()
}
const showOffers = offersPanel(call, refreshMoney)
const showPayouts = payoutsPanel(call, refreshMoney)
const showWebhooks = webhooksPanel(call, '/v1/supplier')

async function showAll() {
  await showMe()
  await Promise.all([showOffers(), showFills(), showDaily(), showPayouts(), showWebhooks()])
}

async function signIn() {
  const wallet = (window as unknown as { ethereum?: Eip1193 }).ethereum
  if (!wallet) throw new Error('No wallet found: this page needs a browser wallet (EIP-1193).')
  const [account] = (await wallet.request({ method: 'eth_requestAccounts' })) as string[]
  if (!account) throw new Error('The wallet shared no account.')
  const address = getAddress(account)
  const chainId = Number(await wallet.request({ method: 'eth_chainId' }))
  const { nonce } = await api<{ nonce: string }>('/v1/supplier/nonce')
  const message = createSiweMessage({
    domain: location.host,
    uri: `${location.origin}/supplier`,
    address,
    chainId,
    nonce,
    version: '1',
    statement: 'Sign in to sell capacity.',
    issuedAt: new Date(),
    expirationTime: new Date(Date.now() + 5 * 60_000),
  })
  const signature = (await wallet.request({
    method: 'personal_sign',
    params: [stringToHex(message), address],
  })) as string
  const signedIn = await api<{ apiKey: string; id: string }>('/v1/supplier/signin', {
    method: 'POST',
    body: { message, signature },
  })
  key.set(signedIn.apiKey)
  keyId.set(signedIn.id)
}

byId('connect').addEventListener('click', async () => {
  const button = byId<HTMLButtonElement>('connect')
  button.disabled = true
  try {
    say(byId('signin-status'), 'Waiting for your wallet…')
    await signIn()
    showSignedIn('console', true)
    await showAll()
    say(byId('status'), 'Signed in.')
    byId('me-title').focus()
  } catch (error) {
    say(byId('signin-status'), error instanceof Error ? error.message : String(error), 'alert')
  } finally {
    button.disabled = false
  }
})

byId('signout').addEventListener('click', async () => {
  // The key this sign-in minted is revoked, so keys do not pile up toward the cap.
  const id = keyId.get()
  if (id) await call(`/v1/supplier/keys/${encodeURIComponent(id)}`, 'DELETE').catch(() => undefined)
  key.clear()
  keyId.clear()
  showSignedIn('console', false)
  forgetView('console')
  say(byId('signin-status'), 'Signed out: the key is revoked and gone from this tab.')
  byId('connect').focus()
})
byId('more-fills').addEventListener('click', () =>
  showFills(true).catch((e) => say(byId('status'), String(e), 'alert')),
)

resume(key, 'console', showAll)
