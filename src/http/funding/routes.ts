// Funding by x402 (contract sections 4, 5, 7, 8): POST /v1/x402/signup (no key: pay, get an
// account and its first key) and POST /v1/x402/refill (Bearer: pay into your own account), beside
// the browser top-up (topup.ts). Each answers an unpaid call with the 402 challenge; a paid one is
// credited to pending.
import { Elysia, t } from 'elysia'
import { AccountStore, FIRST_KEY_NAME } from '../../accounts/accounts.ts'
import { keyPrefix } from '../../accounts/api-keys.ts'
import { keyName } from '../../accounts/key-name.ts'
import { ApiKeyStore } from '../../accounts/key-store.ts'
import { balancesView } from '../../accounts/views.ts'
import { ApiError } from '../../errors.ts'
import { payFromAnyWallet } from '../../funding/accounts.ts'
import type { Funding } from '../../funding/index.ts'
import { moneyMoved } from '../../funding/replays.ts'
import { formatMicros } from '../../money/units.ts'
import { type AuthDeps, buyerAuth } from '../auth.ts'
import { jsonBody } from '../json-body.ts'
import { fundingAmount, termsFor } from './terms.ts'
import { topupRoutes } from './topup.ts'

export interface FundingRouteDeps extends AuthDeps {
  funding?: Funding | undefined
  defaultMaxPriceCents: number
}

/** Every funding route: signup and refill here, the browser top-up beside them. */
export function fundingRoutes(deps: FundingRouteDeps) {
  return new Elysia({ name: 'svc/funding', seed: deps.keys.prefix })
    .use(topupRoutes(deps))
    .use(paidRoutes(deps))
}

function paidRoutes(deps: FundingRouteDeps) {
  const app = new Elysia({ name: 'svc/funding/x402', prefix: '/v1/x402', seed: deps.keys.prefix })
  const funding = deps.funding
  if (!funding) return app
  const { payments, fuse } = funding
  const accounts = new AccountStore(deps.store, deps.keys)
  const apiKeys = new ApiKeyStore(deps.store, deps.keys)

  return app
    .use(buyerAuth(deps))
    .post(
      '/signup',
      async ({ body, request, status, set }) => {
        const amount = fundingAmount(body.amountUsdc)
        const keyName = body.name ?? FIRST_KEY_NAME
        const account = await payFromAnyWallet(payments, fuse, accounts, {
          kind: 'signup',
          terms: termsFor(request, amount, 'svc signup'),
          headers: request.headers,
          maxPriceCents: deps.defaultMaxPriceCents,
          keyName,
        })
        const { settled } = account
        Object.assign(set.headers, settled.responseHeaders)
        let key: { apiKey: string; name: string; keyPrefix: string }
        if (account.created) {
          key = {
            apiKey: account.created.apiKey,
            name: keyName,
            keyPrefix: keyPrefix(account.created.apiKey),
          }
        } else {
          try {
            key = await apiKeys.mint(account.accountId, keyName)
          } catch (error) {
            const atCap = error instanceof ApiError && error.code === 'api_key_limit'
            throw moneyMoved(
              atCap ? 'api_key_limit' : 'key_not_minted',
              atCap
                ? 'the payment is credited, but this account already holds 10 active API keys: no key was minted'
                : 'the payment is credited, but no key could be minted; mint one with an existing key',
              {
                credited: true,
                reconciling: false,
                transaction: settled.transaction,
                accountId: account.accountId,
              },
            )
          }
        }
        // The one and only time this plaintext leaves the gateway.
        return status(201, {
          apiKey: key.apiKey,
          keyPrefix: key.keyPrefix,
          name: key.name,
          accountId: account.accountId,
          wallet: settled.payer,
          amountUsdc: formatMicros(amount),
          transaction: settled.transaction,
        })
      },
      {
        parse: jsonBody,
        body: t.Object({
          amountUsdc: t.String(),
          name: t.Optional(keyName),
        }),
      },
    )
    .post(
      '/refill',
      async ({ buyer, body, request, set }) => {
        const amount = fundingAmount(body.amountUsdc)
        const account = await accounts.require(buyer.accountId)
        const settled = await payments.settle({
          kind: 'refill',
          terms: termsFor(request, amount, 'svc refill'),
          headers: request.headers,
          // Checked before anything is sent on chain: a mismatch moves no money.
          checkPayer: (payer) => {
            if (payer.toLowerCase() !== account.wallet.toLowerCase()) {
              throw new ApiError(403, 'payer_mismatch', "the paying wallet is not this account's wallet")
            }
          },
          accountId: async () => account.id,
        })
        const credit = await payments.credit(settled, account.id)
        Object.assign(set.headers, settled.responseHeaders)
        const after = await accounts.require(account.id)
        return {
          accountId: account.id,
          amountUsdc: formatMicros(amount),
          transaction: settled.transaction,
          credited: credit.status === 'credited',
          balances: {
            confirmedUsdc: balancesView(after.balances).confirmedUsdc,
            pendingUsdc: balancesView(after.balances).pendingUsdc,
          },
        }
      },
      { buyer: true, body: t.Object({ amountUsdc: t.String() }) },
    )
}
