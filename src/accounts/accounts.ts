// Accounts in Redis: create (with the first key, lua/create-account.lua), read, set the max price,
// and credit by hand (lua/credit.lua, audit entry included). Knows nothing of HTTP; the admin
// routes, the agent routes and the CLI all call these.
import { randomBytes } from 'node:crypto'
import { ApiError, badRequest } from '../errors.ts'
import { MICROS_PER_UNIT, type MicroUsdc, parseMicros } from '../money/units.ts'
import { ACCOUNT_TABLE, type Keyspace } from '../redis/keys.ts'
import { AccountCode } from '../redis/result-codes.ts'
import { runScript } from '../redis/scripts.ts'
import type { Store } from '../redis/store.ts'
import { generateApiKey, shownTextPattern } from './api-keys.ts'
import { checkedIdempotencyDigest } from './idempotency-key.ts'
import { accountResultError } from './results.ts'
import { checksumWallet, walletKey } from './wallet.ts'

/** The name of the key an account is created with. */
export const FIRST_KEY_NAME = 'default'
export const MIN_MAX_PRICE_CENTS = 30
export const MAX_MAX_PRICE_CENTS = 80
/** The most one manual credit may add: 1,000,000 USDC. */
export const MAX_CREDIT = (1_000_000 * MICROS_PER_UNIT) as MicroUsdc
export const NOTE_MAX = 500
/** A credit's note is read back from the audit trail: the rule every shown name follows, empty allowed. */
const SHOWN_NOTE = new RegExp(shownTextPattern(0, NOTE_MAX))

export interface Balances {
  confirmed: MicroUsdc
  pending: MicroUsdc
  held: MicroUsdc
  spent: MicroUsdc
  funded: MicroUsdc
  writtenOff: MicroUsdc
}

export interface Account {
  id: string
  wallet: string
  createdAt: number
  maxPriceCents: number
  balances: Balances
}

export interface CreatedAccount {
  account: Account
  /** The first key's plaintext: returned once, never stored. */
  apiKey: string
}

export interface Credited {
  accountId: string
  amount: MicroUsdc
  balances: Balances
  auditId: string
  /** The Idempotency-Key's credit, made before: nothing added now. */
  replayed: boolean
}

/** credit.lua's answer to a retried Idempotency-Key. */
const CREDIT_REPLAYED = 2

// Account ids are `acct_` and 96 random bits in hex: unguessable, and free of the `:` and braces
// that could make an id name some other key (acct:<id>:keys) in the keyspace.
const ACCOUNT_ID = /^acct_[0-9a-f]{24}$/
export const newAccountId = () => `acct_${randomBytes(12).toString('hex')}`
export const isAccountId = (value: string) => ACCOUNT_ID.test(value)

// A positive USDC amount with at most 6 decimals, as a string: "10", "10.5", "10.000000".
const USDC_AMOUNT = /^\d{1,7}(\.\d{1,6})?$/

/** micro-USDC of a credit amount, or null when it is not a positive decimal string within the cap. */
export function parseCreditAmount(text: string): MicroUsdc | null {
  if (!USDC_AMOUNT.test(text)) return null
  const micros = parseMicros(text)
  if (micros === null || micros <= 0 || micros > MAX_CREDIT) return null
  return micros as MicroUsdc
}

function micros(raw: string | undefined): MicroUsdc {
  const value = Number(raw ?? '0')
  if (!Number.isSafeInteger(value)) throw new Error(`account balance is not an integer: ${raw}`)
  return value as MicroUsdc
}

function balancesOf(values: (string | null | undefined)[]): Balances {
  const [confirmed, pending, held, spent, funded, writtenOff] = values.map((v) => micros(v ?? undefined))
  return {
    confirmed: confirmed!,
    pending: pending!,
    held: held!,
    spent: spent!,
    funded: funded!,
    writtenOff: writtenOff!,
  }
}

function toAccount(raw: Record<string, string>): Account | null {
  if (!raw.id || !raw.wallet) return null
  return {
    id: raw.id,
    wallet: raw.wallet,
    createdAt: Number(raw.createdAt),
    maxPriceCents: Number(raw.maxPriceCents),
    balances: balancesOf([raw.confirmed, raw.pending, raw.held, raw.spent, raw.funded, raw.writtenOff]),
  }
}

const accountNotFound = () => accountResultError(AccountCode.NoAccount)

export class AccountStore {
  constructor(
    private readonly store: Store,
    private readonly keys: Keyspace,
  ) {}

  /**
   * A new account for a wallet, with its first key (named `firstKeyName`, as a paid signup asks).
   * A wallet that has an account already is a 409.
   */
  async create(
    walletInput: string,
    maxPriceCents: number,
    firstKeyName: string = FIRST_KEY_NAME,
  ): Promise<CreatedAccount> {
    const wallet = checksumWallet(walletInput)
    if (!wallet) {
      throw badRequest('wallet must be an EVM address: 0x and 40 hex characters (checksummed if mixed case)')
    }
    checkMaxPrice(maxPriceCents)
    const accountId = newAccountId()
    const key = generateApiKey()
    const apart = this.keys.layout === 'apart'
    if (apart && (await this.store.hexists(this.keys.wallets, walletKey(wallet)))) {
      throw accountResultError(AccountCode.WalletTaken)
    }
    const own = [this.keys.account(accountId), this.keys.accountKeys(accountId)]
    const indexes = [this.keys.wallets, this.keys.accounts, this.keys.apiKey(key.digest)]
    let code = Number(
      await runScript(this.store, 'createAccount', apart ? own : [...own, ...indexes], {
        accountId,
        wallet,
        walletLower: walletKey(wallet),
        maxPriceCents,
        keyId: key.id,
        keyDigest: key.digest,
        keyName: firstKeyName,
        keyPrefix: key.prefix,
        table: ACCOUNT_TABLE,
      }),
    )
    if (code === AccountCode.Ok && apart) code = await this.index(accountId, wallet, key, firstKeyName)
    if (code !== AccountCode.Ok) throw accountResultError(code)
    return { account: (await this.get(accountId))!, apiKey: key.plaintext }
  }

  /**
   * The market's indexes of an account written on its own slot (a market held apart): its wallet,
   * then its first key's record. An account that loses its wallet to another is dropped: nothing
   * but this call knows its id yet.
   */
  private async index(
    accountId: string,
    wallet: string,
    key: { id: string; digest: string; prefix: string },
    keyName: string,
  ): Promise<number> {
    const indexed = Number(
      await runScript(this.store, 'indexAccount', [this.keys.wallets, this.keys.accounts], {
        accountId,
        walletLower: walletKey(wallet),
      }),
    )
    if (indexed !== AccountCode.Ok) {
      await this.store.del(this.keys.account(accountId), this.keys.accountKeys(accountId))
      return indexed
    }
    return Number(
      await runScript(this.store, 'indexKey', [this.keys.apiKey(key.digest)], {
        keyId: key.id,
        owner: 'accountId',
        ownerId: accountId,
        keyName,
        keyPrefix: key.prefix,
      }),
    )
  }

  async get(accountId: string): Promise<Account | null> {
    if (!isAccountId(accountId)) return null
    return toAccount(await this.store.hgetall(this.keys.account(accountId)))
  }

  /** The account, or a 404. */
  async require(accountId: string): Promise<Account> {
    const account = await this.get(accountId)
    if (!account) throw accountNotFound()
    return account
  }

  async findByWallet(walletInput: string): Promise<Account | null> {
    const wallet = checksumWallet(walletInput)
    if (!wallet) return null
    const accountId = await this.store.hget(this.keys.wallets, walletKey(wallet))
    return accountId ? this.get(accountId) : null
  }

  /** Sets the most the account pays, in cents per dollar of capacity: 30 to 80, never clamped. */
  async setMaxPrice(accountId: string, maxPriceCents: number): Promise<void> {
    checkMaxPrice(maxPriceCents)
    await this.require(accountId)
    await this.store.hset(this.keys.account(accountId), 'maxPriceCents', maxPriceCents)
  }

  /**
   * Adds a hand credit to confirmed (and funded), with its audit entry, in one script. With an
   * Idempotency-Key, a retry (its reply lost) adds nothing again and answers `replayed`.
   */
  async credit(
    accountId: string,
    amountUsdc: string,
    note: string,
    actor: string,
    idempotencyKey: string | null = null,
  ): Promise<Credited> {
    const digest = idempotencyKey === null ? '' : checkedIdempotencyDigest(idempotencyKey)
    const amount = parseCreditAmount(amountUsdc)
    if (amount === null) {
      throw new ApiError(
        400,
        'invalid_amount',
        'amountUsdc must be a positive decimal string with at most 6 decimals, up to 1000000 (e.g. "10.000000")',
      )
    }
    if (note.length > NOTE_MAX) throw badRequest(`note must be at most ${NOTE_MAX} characters`)
    if (!SHOWN_NOTE.test(note)) {
      throw badRequest(
        'note must have no control or bidirectional formatting character, and no lone surrogate',
      )
    }
    if (!isAccountId(accountId)) throw accountNotFound()
    const result = (await runScript(
      this.store,
      'credit',
      [this.keys.account(accountId), this.keys.auditOf(accountId), this.keys.creditKey(accountId, digest)],
      {
        accountId,
        amount,
        maxAmount: MAX_CREDIT,
        note,
        actor,
        table: ACCOUNT_TABLE,
        idempotencyDigest: digest,
      },
    )) as (number | string)[]
    const code = Number(result[0])
    if (code !== AccountCode.Ok && code !== CREDIT_REPLAYED) throw accountResultError(code)
    return {
      accountId,
      amount,
      balances: balancesOf(result.slice(1, 7).map(String)),
      auditId: String(result[7]),
      replayed: code === CREDIT_REPLAYED,
    }
  }
}

function checkMaxPrice(cents: number): void {
  if (!Number.isInteger(cents) || cents < MIN_MAX_PRICE_CENTS || cents > MAX_MAX_PRICE_CENTS) {
    throw badRequest(
      `maxPriceCents must be an integer from ${MIN_MAX_PRICE_CENTS} to ${MAX_MAX_PRICE_CENTS}`,
      'invalid_max_price',
    )
  }
}
