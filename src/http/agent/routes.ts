// The buyer's self-service routes under /v1/agent, all behind a Bearer key: API keys (list, mint
// with an optional spending limit, lifetime or reset daily, weekly or monthly, change a key's limit,
// its reset or its name, revoke), the max price, and the account summary (also what the MCP tool agent_me answers).
import { Elysia, t } from 'elysia'
import { AccountStore, MAX_MAX_PRICE_CENTS, MIN_MAX_PRICE_CENTS } from '../../accounts/accounts.ts'
import { LIMIT_USDC_PATTERN, MAX_ACTIVE_API_KEYS, parseLimitUsdc } from '../../accounts/api-keys.ts'
import { LIMIT_RESETS } from '../../accounts/budget-periods.ts'
import { keyName } from '../../accounts/key-name.ts'
import { ApiKeyStore } from '../../accounts/key-store.ts'
import { apiKeyView, meView, spendingView } from '../../accounts/views.ts'
import { badRequest } from '../../errors.ts'
import { listActivity } from '../../records/activity.ts'
import { accountUsage } from '../../records/usage.ts'
import { type AuthDeps, buyerAuth } from '../auth.ts'
import { pageQuery, windowQuery } from '../paging.ts'

// Money on the wire is a decimal string: a JSON number is a wrong type here, not an amount.
const limitUsdc = t.String({ pattern: LIMIT_USDC_PATTERN })
const limitReset = t.Union(LIMIT_RESETS.map((kind) => t.Literal(kind)))
const RESET_WITHOUT_LIMIT = 'limitReset needs a limit: send limitUsdc with it (nothing changed)'

function limitOf(text: string): number {
  const micros = parseLimitUsdc(text)
  if (micros === null)
    throw badRequest(
      'limitUsdc must be a decimal string with at most 6 decimals, up to 1000000 (e.g. "5.000000")',
    )
  return micros
}

export function agentRoutes(deps: AuthDeps & { recordRetentionMs?: number }) {
  const accounts = new AccountStore(deps.store, deps.keys)
  const apiKeys = new ApiKeyStore(deps.store, deps.keys)
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
        if (body.limitReset !== undefined && body.limitUsdc === undefined)
          throw badRequest(RESET_WITHOUT_LIMIT)
        const limit = body.limitUsdc === undefined ? null : limitOf(body.limitUsdc)
        const key = await apiKeys.mint(
          buyer.accountId,
          body.name,
          limit,
          buyer.keyId,
          body.limitReset ?? null,
        )
        // The one and only time this plaintext leaves the gateway.
        return status(201, {
          apiKey: key.apiKey,
          id: key.id,
          name: key.name,
          keyPrefix: key.keyPrefix,
          ...spendingView(key),
        })
      },
      {
        buyer: true,
        body: t.Object({
          name: keyName,
          limitUsdc: t.Optional(limitUsdc),
          limitReset: t.Optional(limitReset),
        }),
      },
    )
    .patch(
      '/keys/:id',
      async ({ buyer, params, body }) => {
        if (body.limitUsdc === undefined && body.limitReset === undefined && body.name === undefined) {
          throw badRequest(
            'send limitUsdc (a decimal string, or null for no limit), limitReset (daily, weekly, monthly, or null for a lifetime limit), name, or any of them',
          )
        }
        if (body.limitUsdc === null && typeof body.limitReset === 'string')
          throw badRequest(RESET_WITHOUT_LIMIT)
        const key = await apiKeys.change(
          buyer.accountId,
          params.id,
          {
            limit:
              body.limitUsdc === undefined
                ? undefined
                : body.limitUsdc === null
                  ? null
                  : limitOf(body.limitUsdc),
            reset: body.limitReset,
            name: body.name,
          },
          buyer.keyId,
        )
        return apiKeyView(key)
      },
      {
        buyer: true,
        params: t.Object({ id: t.String() }),
        body: t.Object(
          {
            limitUsdc: t.Optional(t.Union([limitUsdc, t.Null()])),
            limitReset: t.Optional(t.Union([limitReset, t.Null()])),
            name: t.Optional(keyName),
          },
          { additionalProperties: false },
        ),
      },
    )
    .delete(
      '/keys/:id',
      async ({ buyer, params }) => {
        await apiKeys.revoke(buyer.accountId, params.id, buyer.keyId)
        return { status: 'ok' as const }
      },
      { buyer: true, params: t.Object({ id: t.String() }) },
    )
    .patch(
      '/max-price',
      async ({ buyer, body }) => {
        await apiKeys.requireUnlimited(buyer.accountId, buyer.keyId)
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
      '/activity',
      ({ buyer, query }) => {
        const { limit, before } = pageQuery(query)
        return listActivity(deps.store, deps.keys, buyer.accountId, limit, before, deps.recordRetentionMs)
      },
      { buyer: true },
    )
    .get(
      '/usage',
      ({ buyer, query }) => {
        return accountUsage(
          deps.store,
          deps.keys,
          buyer.accountId,
          windowQuery(query),
          deps.recordRetentionMs,
        )
      },
      { buyer: true },
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
