// `svc-gateway account ...`: the operator's account commands, straight to Redis through the same
// services as /admin/v1/accounts, printing the same JSON. Config from the environment: REDIS_URL,
// SVC_REDIS_PREFIX, SVC_DEFAULT_MAX_PRICE_CENTS.
import { randomUUID } from 'node:crypto'
import { parseArgs } from 'node:util'
import { AccountStore } from '../accounts/accounts.ts'
import { ApiKeyStore } from '../accounts/key-store.ts'
import { accountView, creditView } from '../accounts/views.ts'
import { loadStoreConfig } from '../config.ts'
import { recordedKeyspace } from '../redis/layout.ts'
import { createStore } from '../redis/store.ts'
import { runOperatorCommand, UsageError } from './operator-command.ts'

export const ACCOUNT_USAGE = `usage:
  svc-gateway account create --wallet <0x address>
  svc-gateway account credit <accountId> <amountUsdc> [--note <text>] [--idempotency-key <text>]
      (without --idempotency-key one is made and printed on stderr first: rerun with it)
  svc-gateway account show <accountId>`

function parse(args: string[]) {
  try {
    return parseArgs({
      args,
      allowPositionals: true,
      options: {
        wallet: { type: 'string' },
        note: { type: 'string' },
        'idempotency-key': { type: 'string' },
      },
    })
  } catch (error) {
    throw new UsageError((error as Error).message)
  }
}

/** Runs one account command; prints its JSON on stdout, or an error in the API's shape on stderr. */
export async function account(args: string[]): Promise<void> {
  const config = loadStoreConfig()
  const store = createStore(config.redisUrl, { name: 'svc-cli' })
  try {
    await runOperatorCommand(ACCOUNT_USAGE, async () => {
      const { values, positionals } = parse(args)
      const [command, ...rest] = positionals
      const keys = await recordedKeyspace(store, config.redisPrefix)
      const stores = { accounts: new AccountStore(store, keys), apiKeys: new ApiKeyStore(store, keys) }
      return run(command, rest, values, stores, config)
    })
  } finally {
    store.close()
  }
}

async function run(
  command: string | undefined,
  rest: string[],
  values: { wallet?: string; note?: string; 'idempotency-key'?: string },
  { accounts, apiKeys }: { accounts: AccountStore; apiKeys: ApiKeyStore },
  config: { defaultMaxPriceCents: number },
) {
  switch (command) {
    case 'create': {
      if (
        !values.wallet ||
        rest.length ||
        values.note !== undefined ||
        values['idempotency-key'] !== undefined
      )
        throw new UsageError('account create takes --wallet <0x address>')
      const { account, apiKey } = await accounts.create(values.wallet, config.defaultMaxPriceCents)
      return { accountId: account.id, wallet: account.wallet, apiKey }
    }
    case 'credit': {
      const [accountId, amountUsdc] = rest
      if (!accountId || !amountUsdc || rest.length > 2 || values.wallet !== undefined) {
        throw new UsageError('account credit takes <accountId> <amountUsdc>')
      }
      // Always with a key: the same command run again with it (its answer lost) credits nothing
      // more. One made here is printed before the credit is sent, so a rerun can carry it.
      let key = values['idempotency-key']
      if (key === undefined) {
        key = `cli-${randomUUID()}`
        console.error(`to retry this credit safely, run again with --idempotency-key ${key}`)
      }
      return creditView(await accounts.credit(accountId, amountUsdc, values.note ?? '', 'cli', key))
    }
    case 'show': {
      const [accountId] = rest
      if (
        !accountId ||
        rest.length > 1 ||
        values.wallet !== undefined ||
        values.note !== undefined ||
        values['idempotency-key'] !== undefined
      )
        throw new UsageError('account show takes <accountId>')
      const account = await accounts.require(accountId)
      return accountView(account, await apiKeys.count(account.id))
    }
    default:
      throw new UsageError(command ? `unknown account command: ${command}` : 'which account command?')
  }
}
