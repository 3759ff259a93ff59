// The buyer's self-service routes under /v1/agent, all behind a Bearer key: API keys (list, mint,
// revoke), the max price, and the account summary (also what the MCP tool agent_me answers).
import { Elysia, t } from 'elysia'
import { AccountStore, MAX_MAX_PRICE_CENTS, MIN_MAX_PRICE_CENTS } from '../../accounts/accounts.ts'
import { KEY_NAME_MAX, MAX_ACTIVE_API_KEYS } from '../../accounts/api-keys.ts'
import { ApiKeyStore } from '../../accounts/key-store.ts'
import { apiKeyView, meView } from '../../accounts/views.ts'
import { type AuthDeps, buyerAuth } from '../auth.ts'

export function agentRoutes(deps: AuthDeps) {
  const accounts = new AccountStore(deps.redis, deps.keys)
  const apiKeys = new ApiKeyStore(deps.redis, deps.keys)
  return new Elysia({ name: 'svc/agent', prefix: '/v1/agent', seed: deps.keys.prefix })
    .use(buyerAuth(deps))
    .get(
      '/keys',
      async ({ buyer }) => {
        const keys = await apiKeys.list(buyer.accountId)
        return {
          activeApiKeys: keys.map(apiKeyView),
          activeApiKeyCount: keys.length,
          maxActiveApiKeys: MAX_ACTIVE_API_KEYS,
        }
      },
      { buyer: true },
    )
    .post(
      '/keys',
      async ({ buyer, body, status }) => {
        const key = await apiKeys.mint(buyer.accountId, body.name)
        // The one and only time this plaintext leaves the gateway.
        return status(201, { apiKey: key.apiKey, id: key.id, name: key.name, keyPrefix: key.keyPrefix })
      },
      {
        buyer: true,
        body: t.Object({ name: t.String({ minLength: 1, maxLength: KEY_NAME_MAX }) }),
      },
    )
    .delete(
      '/keys/:id',
      async ({ buyer, params }) => {
        await apiKeys.revoke(buyer.accountId, params.id)
        return { status: 'ok' as const }
      },
      { buyer: true, params: t.Object({ id: t.String() }) },
    )
    .patch(
      '/max-price',
      async ({ buyer, body }) => {
        await accounts.setMaxPrice(buyer.accountId, body.maxPriceCents)
        return { maxPriceCents: body.maxPriceCents }
      },
      {
        buyer: true,
        // A plain number, not t.Integer: Elysia's Integer also takes numeric strings, and "50" is
        // a wrong type here, not a price. multipleOf 1 makes it an integer; nothing is clamped.
        body: t.Object({
          maxPriceCents: t.Number({
            minimum: MIN_MAX_PRICE_CENTS,
            maximum: MAX_MAX_PRICE_CENTS,
            multipleOf: 1,
          }),
        }),
      },
    )
    .get(
      '/me',
      async ({ buyer }) => {
        const [account, keyCount] = await Promise.all([
          accounts.require(buyer.accountId),
          apiKeys.count(buyer.accountId),
        ])
        return meView(account, keyCount, MAX_ACTIVE_API_KEYS)
      },
      { buyer: true },
    )
}
