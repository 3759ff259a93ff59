// `svc-gateway sizing`'s options, from its command line.
import type { Layout } from '../redis/keys.ts'
import { LAYOUTS } from '../redis/layout.ts'

export interface SizingOptions {
  masters: number[]
  replicas: number[]
  /** Concurrent clients per replica. */
  clients: number
  seconds: number
  /** Seconds of load before the measured ones, so the measured run finds warm processes; 0 skips it. */
  warmSeconds?: number
  /** Redis's I/O threads (1: the main thread does all, Redis's default). */
  ioThreads?: number
  /** The market's layout (default one slot). */
  layout?: Layout
  /** Offers at the one ask, the load split between them by their in-flight caps (default 1). */
  offers?: number
  /** Each offer's in-flight cap (default: room for every client, split between the offers). */
  maxInFlight?: number
  /** Funded accounts per replica, its clients spread over them (default: one per client). */
  accounts?: number
  /** Physical cores kept for the masters, one master to a core (0 or absent: none kept). */
  pin?: number
}

function list(value: string | undefined, fallback: number[], name: string): number[] {
  if (value === undefined) return fallback
  const numbers = value.split(',').map((n) => Number(n.trim()))
  if (numbers.length === 0 || numbers.some((n) => !Number.isInteger(n) || n < 1 || n > 64))
    throw new Error(`--${name}: a comma-separated list of whole numbers from 1 to 64`)
  return numbers
}

export function sizingOptions(argv: string[]): SizingOptions {
  const flags = new Map<string, string>()
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!
    if (!arg.startsWith('--')) throw new Error(`unexpected argument: ${arg}`)
    const [name, inline] = arg.slice(2).split('=', 2) as [string, string | undefined]
    const value = inline ?? argv[++i]
    if (value === undefined) throw new Error(`--${name} needs a value`)
    flags.set(name, value)
  }
  for (const name of flags.keys())
    if (
      ![
        'masters',
        'replicas',
        'clients',
        'seconds',
        'io-threads',
        'layout',
        'offers',
        'max-in-flight',
        'accounts',
        'pin',
      ].includes(name)
    )
      throw new Error(`unknown option --${name}`)
  const [clients] = list(flags.get('clients'), [32], 'clients')
  const [seconds] = list(flags.get('seconds'), [5], 'seconds')
  const [ioThreads] = list(flags.get('io-threads'), [1], 'io-threads')
  const [offers] = list(flags.get('offers'), [1], 'offers')
  const maxInFlight = flags.has('max-in-flight') ? Number(flags.get('max-in-flight')) : undefined
  if (maxInFlight !== undefined && !(Number.isInteger(maxInFlight) && maxInFlight >= 1))
    throw new Error('--max-in-flight: a whole number from 1')
  const [accounts] = list(flags.get('accounts'), [clients!], 'accounts')
  const layout = flags.get('layout') ?? 'one-slot'
  if (!LAYOUTS.includes(layout as Layout)) throw new Error(`--layout: one of ${LAYOUTS.join(', ')}`)
  const masters = list(flags.get('masters'), [1, 3], 'masters')
  const [pin] = list(flags.get('pin'), [0], 'pin')
  if (flags.has('pin') && pin! < Math.max(...masters))
    throw new Error(`--pin ${pin}: fewer cores than masters (${Math.max(...masters)}): one master to a core`)
  return {
    layout: layout as Layout,
    offers: offers!,
    accounts: accounts!,
    masters,
    replicas: list(flags.get('replicas'), [1, 2, 4, 8], 'replicas'),
    clients: clients!,
    seconds: seconds!,
    ioThreads: ioThreads!,
    ...(pin ? { pin } : {}),
    ...(maxInFlight ? { maxInFlight } : {}),
  }
}
