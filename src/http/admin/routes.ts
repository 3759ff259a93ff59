// Operator routes for accounts under /admin/v1/accounts (a fixed interface: other teams script
// it), behind the admin token: create an account with its first key, credit it by hand (with an
// audit entry), read it by id or find it by wallet. Key plaintexts appear only in the create answer.
import { Elysia, t } from 'elysia'
import { AccountStore, NOTE_MAX } from '../../accounts/accounts.ts'
import { ApiKeyStore } from '../../accounts/key-store.ts'
import { accountView, creditView } from '../../accounts/views.ts'
import { checksumWallet } from '../../accounts/wallet.ts'
import type { GatewayConfig } from '../../config.ts'
import { badRequest, notFound } from '../../errors.ts'
import { type AuthDeps, adminAuth } from '../auth.ts'

export interface AdminDeps extends AuthDeps {
  config: Pick<GatewayConfig, 'adminToken' | 'defaultMaxPriceCents'>
}

export function adminAccountRoutes(deps: AdminDeps) {
  const accounts = new AccountStore(deps.store, deps.keys)
  const apiKeys = new ApiKeyStore(deps.store, deps.keys)
  return new Elysia({ name: 'svc/admin-accounts', prefix: '/admin/v1/accounts', seed: deps.keys.prefix })
    .use(adminAuth(deps.config.adminToken))
    .post(
      '/',
      async ({ body, status }) => {
        const { account, apiKey } = await accounts.create(body.wallet, deps.config.defaultMaxPriceCents)
        return status(201, { accountId: account.id, wallet: account.wallet, apiKey })
      },
      { admin: true, body: t.Object({ wallet: t.String() }) },
    )
    .post(
      '/:accountId/credit',
      async ({ params, body, request, set }) => {
        // Optional: with it, a credit retried after a lost answer adds nothing again.
        const key = request.headers.get('idempotency-key')
        const credited = await accounts.credit(
          params.accountId,
          body.amountUsdc,
          body.note ?? '',
          'admin-api',
          key,
        )
        if (credited.replayed) set.headers['idempotent-replayed'] = 'true'
        return creditView(credited)
      },
      {
        admin: true,
        params: t.Object({ accountId: t.String() }),
        body: t.Object({
          amountUsdc: t.String(),
          note: t.Optional(t.String({ maxLength: NOTE_MAX })),
        }),
      },
    )
    .get(
      '/',
      async ({ query }) => {
        const wallet = checksumWallet(query.wallet ?? '')
        if (!wallet) {
          throw badRequest('wallet must be an EVM address: 0x and 40 hex characters', 'invalid_wallet')
        }
        const account = await accounts.findByWallet(wallet)
        if (!account) throw notFound('no account has this wallet', 'account_not_found')
        return accountView(account, await apiKeys.count(account.id))
      },
      { admin: true },
    )
    .get(
      '/:accountId',
      async ({ params }) => {
        const account = await accounts.require(params.accountId)
        return accountView(account, await apiKeys.count(account.id))
      },
      { admin: true, params: t.Object({ accountId: t.String() }) },
    )
}
