// `svc-gateway offer ...`: the operator's offer commands, straight to Redis through the same
// service as /admin/v1/offers, printing the same JSON (never an upstream key). Config from the
// environment: REDIS_URL, SVC_REDIS_PREFIX, SVC_MASTER_KEY.
import { parseArgs } from 'node:util'
import { shownTextPattern } from '../accounts/api-keys.ts'
import { loadStoreConfig, masterKey } from '../config.ts'
import {
  ASK_MAX_CENTS,
  ASK_MIN_CENTS,
  MAX_CAPACITY_MICRO_DIEM,
  MAX_SUPPLIER_LABEL_CHARS,
  MAX_UPSTREAM_KEY_CHARS,
  type OfferInput,
  OfferService,
} from '../market/offers.ts'
import { type MicroDiem, parseMicros } from '../money/units.ts'
import { recordedKeyspace } from '../redis/layout.ts'
import { createStore } from '../redis/store.ts'
import { runOperatorCommand, UsageError } from './operator-command.ts'

export const OFFER_USAGE = `usage:
  svc-gateway offer create --base-url <url> --key <upstream key> --ask <cents> --capacity <DIEM>
                           [--max-in-flight <n>] [--supplier <label>] [--idempotency-key <text>]
  svc-gateway offer update <id> [--ask <cents>] [--capacity <DIEM>] [--max-in-flight <n>]
                                [--base-url <url>] [--key <upstream key>]
  svc-gateway offer pause|resume|delete <id>
  svc-gateway offer list`

const OPTIONS = {
  'base-url': { type: 'string' },
  key: { type: 'string' },
  ask: { type: 'string' },
  capacity: { type: 'string' },
  'max-in-flight': { type: 'string' },
  supplier: { type: 'string' },
  'idempotency-key': { type: 'string' },
} as const

type Values = Partial<Record<keyof typeof OPTIONS, string>>

function wholeNumber(raw: string, name: string, min: number, max: number): number {
  if (!/^\d+$/.test(raw) || Number(raw) < min || Number(raw) > max) {
    throw new UsageError(`--${name} must be an integer from ${min} to ${max}`)
  }
  return Number(raw)
}

/** An http(s) URL, as the admin API takes it: one the supplier call can parse. */
function httpUrl(raw: string): boolean {
  try {
    return /^https?:$/.test(new URL(raw).protocol) && !/\s/.test(raw)
  } catch {
    return false
  }
}

/** A label shown in pages and logs: the rule /admin/v1/offers checks it by. */
const SUPPLIER_LABEL = new RegExp(shownTextPattern(1, MAX_SUPPLIER_LABEL_CHARS))

/** Text of 1 to `max` characters: the admin API's bounds on the same field. */
function text(raw: string, name: string, max: number): string {
  if (raw.length < 1 || raw.length > max) throw new UsageError(`--${name} must be 1 to ${max} characters`)
  return raw
}

// The same bounds as /admin/v1/offers: past them the market's sums stop being exact integers
// (a capacity past a million DIEM made /v1/capacity fail for every buyer).
function input(values: Values): OfferInput {
  const out: OfferInput = {}
  if (values['base-url'] !== undefined) {
    if (!httpUrl(values['base-url'])) throw new UsageError('--base-url must be an http(s) URL')
    out.upstreamBaseUrl = values['base-url'].replace(/\/+$/, '')
  }
  if (values.key !== undefined) out.upstreamApiKey = text(values.key, 'key', MAX_UPSTREAM_KEY_CHARS)
  if (values.ask !== undefined) out.askCents = wholeNumber(values.ask, 'ask', ASK_MIN_CENTS, ASK_MAX_CENTS)
  if (values.capacity !== undefined) {
    const micros = parseMicros(values.capacity)
    if (micros === null || micros <= 0 || micros > MAX_CAPACITY_MICRO_DIEM)
      throw new UsageError('--capacity must be a positive DIEM amount, at most 6 decimals, up to 1000000')
    out.capacity = micros as MicroDiem
  }
  if (values['max-in-flight'] !== undefined) {
    out.maxInFlight = wholeNumber(values['max-in-flight'], 'max-in-flight', 1, 100_000)
  }
  if (values.supplier !== undefined) {
    out.supplier = text(values.supplier, 'supplier', MAX_SUPPLIER_LABEL_CHARS)
    if (!SUPPLIER_LABEL.test(out.supplier))
      throw new UsageError('--supplier must have no control or bidirectional formatting character')
  }
  return out
}

/** How many positionals each command takes (its name included), and whether it takes options. */
const SHAPES: Record<string, { positionals: number; options: boolean }> = {
  create: { positionals: 1, options: true },
  update: { positionals: 2, options: true },
  pause: { positionals: 2, options: false },
  resume: { positionals: 2, options: false },
  delete: { positionals: 2, options: false },
  list: { positionals: 1, options: false },
}

/** More arguments than the command takes, or options it ignores: a usage error, nothing done. */
function checkArguments(command: string | undefined, positionals: number, values: Values): void {
  const shape = command === undefined ? undefined : SHAPES[command]
  if (!shape) return
  if (positionals > shape.positionals)
    throw new UsageError(`offer ${command} takes ${shape.positionals === 1 ? 'no argument' : 'one offer id'}`)
  if (!shape.options && Object.keys(values).length > 0)
    throw new UsageError(`offer ${command} takes no options (got --${Object.keys(values).join(', --')})`)
  if (command !== 'create' && values['idempotency-key'] !== undefined)
    throw new UsageError('only offer create takes --idempotency-key')
}

async function run(
  offers: OfferService,
  command: string | undefined,
  id: string | undefined,
  values: Values,
) {
  const needId = () => {
    if (!id) throw new UsageError(`offer ${command} needs an offer id`)
    return id
  }
  switch (command) {
    case 'create': {
      const fields = input(values)
      const { upstreamBaseUrl, upstreamApiKey, askCents, capacity } = fields
      if (!upstreamBaseUrl || !upstreamApiKey || askCents === undefined || capacity === undefined) {
        throw new UsageError('offer create needs --base-url, --key, --ask and --capacity')
      }
      const offer = { ...fields, upstreamBaseUrl, upstreamApiKey, askCents, capacity }
      // With a key, the same command run again (its answer lost) prints the offer it made.
      const key = values['idempotency-key']
      return key === undefined ? offers.create(offer) : (await offers.createOnce(offer, key)).offer
    }
    case 'update':
      return offers.update(needId(), input(values))
    case 'pause':
      return offers.update(needId(), { status: 'paused' })
    case 'resume':
      return offers.update(needId(), { status: 'active' })
    case 'delete':
      await offers.remove(needId())
      return { status: 'ok' }
    case 'list':
      return { object: 'list', data: await offers.list() }
    default:
      throw new UsageError(command ? `unknown offer command: ${command}` : 'offer needs a command')
  }
}

export async function offer(args: string[]): Promise<void> {
  let parsed: ReturnType<
    typeof parseArgs<{ args: string[]; allowPositionals: true; options: typeof OPTIONS }>
  >
  try {
    parsed = parseArgs({ args, allowPositionals: true, options: OPTIONS })
  } catch (error) {
    console.error(`${(error as Error).message}\n${OFFER_USAGE}`)
    process.exitCode = 2
    return
  }
  const config = loadStoreConfig()
  const store = createStore(config.redisUrl, { name: 'svc-cli' })
  try {
    await runOperatorCommand(OFFER_USAGE, async () => {
      const offers = new OfferService(store, await recordedKeyspace(store, config.redisPrefix), masterKey())
      const [command, id] = parsed.positionals
      checkArguments(command, parsed.positionals.length, parsed.values)
      return run(offers, command, id, parsed.values)
    })
  } finally {
    store.close()
  }
}
