// Browser top-up (contract section 4, "Browser top-up route"): GET /topup serves a page where a
// person connects an injected wallet and signs the EIP-3009 authorization; the page pays
// POST /v1/x402/topup (no key: the paying wallet's account is credited, created if need be) and
// polls GET /v1/x402/payments/{transaction} until the credit is confirmed (or reversed).
import { createHash } from 'node:crypto'
import { Elysia, t } from 'elysia'
import { AccountStore } from '../../accounts/accounts.ts'
import { keyPrefix } from '../../accounts/api-keys.ts'
import { balancesView } from '../../accounts/views.ts'
import { badRequest, notFound } from '../../errors.ts'
import { payFromAnyWallet } from '../../funding/accounts.ts'
import { transactionOf } from '../../funding/ledger.ts'
import { formatMicros } from '../../money/units.ts'
import { jsonBody } from '../json-body.ts'
import type { FundingRouteDeps } from './routes.ts'
import { fundingAmount, termsFor } from './terms.ts'
import pageSource from './topup.html' with { type: 'text' }

// Imported as text (so the compiled binary carries it); bun-types types every .html import as a bundle.
const page = pageSource as unknown as string
// The page's one inline script and one inline style, allowed by their hashes: nothing else may run
// or restyle a page that asks a wallet to sign, and no other site may frame it.
const script = /<script>([\s\S]*?)<\/script>/.exec(page)?.[1] ?? ''
const scriptHash = createHash('sha256').update(script).digest('base64')
const style = /<style>([\s\S]*?)<\/style>/.exec(page)?.[1] ?? ''
const styleHash = createHash('sha256').update(style).digest('base64')
const PAGE_HEADERS = {
  'content-type': 'text/html; charset=utf-8',
  'cache-control': 'no-store',
  'content-security-policy': [
    "default-src 'none'",
    `script-src 'sha256-${scriptHash}'`,
    `style-src 'sha256-${styleHash}'`,
    "connect-src 'self'",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join('; '),
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
}

/** The page asks after a pending payment this often, or as often as the watcher looks when that is sooner. */
const PAGE_POLL_MS = 1_500

const TRANSACTION = /^0x[0-9a-fA-F]{64}$/

/**
 * A payment as the lookup by `asked` answers it. One taken back (a reorg took its transaction out,
 * its authorization expired unused) is final: status reversed, the same shape, so a client polling
 * it stops there.
 */
function paymentView(now: { id: string; payment: Record<string, string> }, asked: string) {
  const transaction = transactionOf(now.id) || asked
  const { state, reversedAt } = now.payment
  const micros = Number(now.payment.amount)
  return {
    paymentId: now.id,
    transaction,
    amountUsdc: formatMicros(micros),
    micros,
    status: state as 'pending' | 'confirmed' | 'reversed',
    ...(transaction !== asked && { movedFrom: asked }),
    ...(state === 'reversed' && { reversedAt: new Date(Number(reversedAt)).toISOString() }),
  }
}

export function topupRoutes(deps: FundingRouteDeps) {
  const app = new Elysia({ name: 'svc/topup', seed: deps.keys.prefix })
  const funding = deps.funding
  if (!funding) return app
  const { payments, fuse, ledger } = funding
  const accounts = new AccountStore(deps.store, deps.keys)
  const pollMs = Math.min(PAGE_POLL_MS, funding.config.watchIntervalMs)
  const served = page.replace('data-poll-ms="1500"', `data-poll-ms="${pollMs}"`)

  return app
    .get('/topup', () => new Response(served, { headers: PAGE_HEADERS }))
    .post(
      '/v1/x402/topup',
      async ({ body, request, set }) => {
        const amount = fundingAmount(body.amountUsdc)
        const account = await payFromAnyWallet(payments, fuse, accounts, {
          kind: 'topup',
          terms: termsFor(request, amount, 'svc top-up'),
          headers: request.headers,
          maxPriceCents: deps.defaultMaxPriceCents,
        })
        const { settled } = account
        Object.assign(set.headers, settled.responseHeaders)
        const after = await accounts.require(account.accountId)
        const { confirmedUsdc, pendingUsdc } = balancesView(after.balances)
        return {
          accountId: account.accountId,
          wallet: settled.payer,
          amountUsdc: formatMicros(amount),
          transaction: settled.transaction,
          status: 'pending' as const,
          credited: account.credit.status === 'credited',
          balances: { confirmedUsdc, pendingUsdc },
          // A wallet's first top-up opens its account; its first key is shown this once.
          ...(account.created && {
            apiKey: account.created.apiKey,
            keyPrefix: keyPrefix(account.created.apiKey),
          }),
        }
      },
      { parse: jsonBody, body: t.Object({ amountUsdc: t.String() }) },
    )
    .get('/v1/x402/payments/:transaction', async ({ params }) => {
      if (!TRANSACTION.test(params.transaction)) {
        throw badRequest('transaction must be 0x and 64 hex characters', 'invalid_transaction')
      }
      // A payment a reorg moved to the transaction that did use its authorization is answered by
      // its old hash too, as the payment it is now: one request, the same shape, `transaction` the
      // new hash and `movedFrom` the one asked for, so any client (the page) follows it.
      const asked = params.transaction.toLowerCase()
      const found = await Promise.all(
        (await ledger.paymentsOf(payments.chainId, asked)).map((id) => ledger.paymentNow(id)),
      )
      const now = found.filter((p) => p !== null).map((p) => paymentView(p, asked))
      if (now.length === 0)
        throw notFound('no credited payment has this transaction (yet)', 'payment_not_found')
      const confirmationsRequired = funding.config.confirmations
      if (now.length === 1) {
        const { paymentId: _, micros: __, ...one } = now[0]!
        return { ...one, confirmationsRequired }
      }
      // One transaction that used several authorizations (a batch) answers each in `payments`,
      // and as a whole: the sum credited, pending while any is, reversed once all are.
      const statuses = new Set(now.map((p) => p.status))
      const status = statuses.has('pending')
        ? 'pending'
        : statuses.has('confirmed')
          ? 'confirmed'
          : 'reversed'
      // A reversed payment credited nothing: counted only when the whole transaction is reversed.
      const counted = status === 'reversed' ? now : now.filter((p) => p.status !== 'reversed')
      const micros = counted.reduce((sum, p) => sum + p.micros, 0)
      return {
        transaction: asked,
        amountUsdc: formatMicros(micros),
        status: status as 'pending' | 'confirmed' | 'reversed',
        confirmationsRequired,
        payments: now.map(({ micros: _, ...p }) => p),
      }
    })
}
