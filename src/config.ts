// Environment -> typed, validated config. A bad or missing value stops the process with one line
// that names the variable and what it expected.

import { ConfigError, type Env, integer, oneOf, read, refuseUnset, required, url } from './config-env.ts'
import { loadMarketConfig, type MarketConfig } from './config-market.ts'
import { parseMicros } from './money/units.ts'
import type { Layout } from './redis/keys.ts'
import { LAYOUTS } from './redis/layout.ts'
import { parseRedisTarget } from './redis/target.ts'

export { ConfigError } from './config-env.ts'
export { type MarketConfig, reapIntervalMs } from './config-market.ts'

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const
export type LogLevel = (typeof LOG_LEVELS)[number]

/** One server (redis://, or redis+unix:// on this machine), a Sentinel group or a Cluster: see src/redis/target.ts. */
function redisUrl(env: Env): string {
  const raw = read(env, 'REDIS_URL')
  if (raw && /^rediss?\+(sentinel|cluster):/.test(raw)) {
    let kind: string
    try {
      kind = parseRedisTarget(raw).kind
    } catch (error) {
      throw new ConfigError('REDIS_URL', `a valid Sentinel or Cluster URL (${(error as Error).message})`)
    }
    // One that names no node would be dialled as a single server at no address.
    if (kind === 'single') throw new ConfigError('REDIS_URL', 'a valid Sentinel or Cluster URL (no nodes)')
    return raw
  }
  const checked = url(env, 'REDIS_URL', ['redis:', 'rediss:', 'redis+unix:'])
  // Without a host (or a socket path) the client would dial a name of its own guessing, for ever.
  const parsed = new URL(checked)
  if (parsed.protocol === 'redis+unix:' ? parsed.pathname.length < 2 : parsed.hostname === '')
    throw new ConfigError('REDIS_URL', 'a URL naming its host (or, for redis+unix://, its socket path)')
  return checked
}

export interface GatewayConfig {
  port: number
  host: string
  redisUrl: string
  /** Every Redis key starts with this; it holds the one hash tag that keeps all keys in one slot. */
  redisPrefix: string
  /**
   * SVC_REDIS_LAYOUT: 'one-slot' (every key under the prefix's tag; one Redis or one master carries
   * the market) or 'apart' (each account shard's and offer's keys under tags of their own, the
   * request path in two-phase steps, so a Cluster's masters share the market). The first gateway
   * records it in Redis; one started with another refuses to start (src/redis/layout.ts).
   */
  redisLayout: Layout
  adminToken: string
  masterKey: Uint8Array
  upstreamUrl: string
  upstreamApiKey: string | undefined
  /**
   * The gateway's own public URL (no trailing slash): a Sign-In with Ethereum message must name its
   * host as the domain and its origin as the URI. Never taken from a request's Host header.
   */
  publicUrl: string
  /** Sign-In with Ethereum nonces issued per minute across all replicas (429 past it). */
  siweNoncesPerMinute: number
  /** Of those, how many one client address may ask for per minute (429 past it). */
  siweNoncesPerClientPerMinute: number
  /** Upstream key checks (offer posts) one supplier may make per minute across all replicas (429 past it). */
  supplierKeyChecksPerMinute: number
  /** Upstream key checks of all suppliers together per minute across all replicas (429 past it). */
  keyChecksPerMinuteTotal: number
  defaultMaxPriceCents: number
  catalogSyncSeconds: number
  disabledModels: string[]
  logLevel: LogLevel
  /** Largest request body accepted (413 past it). */
  maxBodyBytes: number
  market: MarketConfig
  inference: InferenceConfig
  records: RecordsConfig
  /** x402 funding; undefined when no SVC_X402_* / chain variable is set (the gateway runs unfunded). */
  funding: FundingConfig | undefined
  payouts: PayoutConfig
  webhooks: WebhookConfig
}

/** Webhook delivery: each replica's consumer of the owners' event streams (src/webhooks/consumer.ts). */
export interface WebhookConfig {
  /**
   * Test-only (SVC_WEBHOOK_ALLOW_LOOPBACK=1): lets endpoints on loopback (a test's own receiver).
   * Off by default; never set it in production. Private, link-local and the rest stay refused.
   */
  allowLoopback: boolean
  /** How long one POST may take, its host's resolution included, before it counts as failed. */
  timeoutMs: number
  /** The wait before the first retry; each next one waits twice as long. */
  backoffMs: number
  /** Attempts per event and endpoint before the delivery is marked failed. */
  maxAttempts: number
  /** How often the consumer looks for new events and retries that are due. */
  pollMs: number
  /** Test-only, never read from the environment: a resolver in place of DNS (address-check.ts). */
  resolve?: (host: string) => Promise<string[]>
}

/** Supplier payouts in USDC, sent on the funding network from the operator's payout wallet. */
export interface PayoutConfig {
  /** The payout wallet's key; absent, payout requests answer 503 payouts_unavailable. */
  privateKey: `0x${string}` | undefined
  /** micro-USDC */
  minMicros: number
  /** Below these balances of the payout wallet the log warns: micro-USDC, and wei of gas. */
  lowUsdcMicros: number
  lowGasWei: bigint
  /** How often the sender looks for work, and reads the wallet's balances for /metrics. */
  intervalMs: number
  /** The sender lock's time to live (renewed while held). */
  lockTtlMs: number
  /** How long a payout's transaction may stay unmined before it is re-signed with a higher fee. */
  bumpAfterMs: number
}

function sixDecimals(env: Env, name: string, fallback: string): number {
  const micros = parseMicros(read(env, name) ?? fallback)
  if (micros === null || micros < 1)
    throw new ConfigError(name, 'an amount above zero with at most 6 decimals')
  return micros
}

function loadPayoutConfig(env: Env, funding: FundingConfig | undefined): PayoutConfig {
  const privateKey = read(env, 'SVC_PAYOUT_PRIVATE_KEY')
  if (privateKey !== undefined && !/^0x[0-9a-fA-F]{64}$/.test(privateKey)) {
    throw new ConfigError('SVC_PAYOUT_PRIVATE_KEY', 'a 0x-prefixed 32-byte hex private key')
  }
  if (privateKey !== undefined && !funding) {
    throw new ConfigError(
      'SVC_PAYOUT_PRIVATE_KEY',
      'set with the funding network (SVC_X402_NETWORK, SVC_CHAIN_RPC_URL ...)',
    )
  }
  // Each sender counts the key's nonces its own way: on one key, one signs at the other's nonce
  // and that transaction is never mined.
  if (privateKey !== undefined && privateKey.toLowerCase() === funding?.relayerPrivateKey?.toLowerCase()) {
    throw new ConfigError('SVC_PAYOUT_PRIVATE_KEY', 'a key other than SVC_RELAYER_PRIVATE_KEY')
  }
  const gasMicroEth = sixDecimals(env, 'SVC_PAYOUT_LOW_GAS_ETH', '0.001000')
  return {
    privateKey: privateKey as `0x${string}` | undefined,
    minMicros: sixDecimals(env, 'SVC_PAYOUT_MIN_USDC', '1.000000'),
    lowUsdcMicros: sixDecimals(env, 'SVC_PAYOUT_LOW_USDC', '100.000000'),
    lowGasWei: BigInt(gasMicroEth) * 1_000_000_000_000n,
    intervalMs: integer(env, 'SVC_PAYOUT_INTERVAL_MS', 2_000, 20, 600_000),
    lockTtlMs: integer(env, 'SVC_PAYOUT_LOCK_MS', 30_000, 200, 600_000),
    bumpAfterMs: integer(env, 'SVC_PAYOUT_BUMP_MS', 180_000, 100, 86_400_000),
  }
}

/** The supplier call and the relay. */
export interface InferenceConfig {
  /** max_tokens admitted when a request names none (capped by the model's own limit). */
  defaultMaxTokens: number
  /** A buffered supplier call, whole. */
  upstreamTimeoutMs: number
  /** A streamed supplier call: its head and first frame (past it, the next supplier is tried). */
  firstByteTimeoutMs: number
  /** A stream with no content this long (comments and usage are none) is given up on and settled. */
  streamIdleMs: number
  /** A stream still open this long is given up on, billed as incomplete: one that never stalls ends too. */
  streamMaxMs: number
  /** A comment goes to a streaming client after this long without a frame. */
  keepAliveMs: number
  /**
   * How long a stream whose clear lost the store keeps trying it, its client kept open with
   * keep-alives, before ending with an outcome it could not learn.
   */
  streamClearWaitMs: number
  /** A video job not retrieved within this long expires: its hold comes back, its media answers 410. */
  videoJobTtlMs: number
  /** The clock video jobs age by (ms); unset, the wall clock. Never from the environment: tests set it. */
  videoClock?: () => number
  /** On SIGTERM: how long open requests and streams may take to finish before they are cut. */
  shutdownGraceMs: number
  /** A buffered supplier answer (chat, Responses, images in b64, a video job id): past it, fall forward. */
  maxUpstreamBodyBytes: number
  /** One SSE frame of a supplier stream: past it, the stream ends truncated. */
  maxUpstreamFrameBytes: number
  /** A supplier stream in all (its chunked framing bounded by as much again): past it, it ends truncated. */
  maxUpstreamStreamBytes: number
  /** A video job's media, read whole before it is charged: past it, the job is refunded. */
  maxUpstreamVideoBytes: number
}

/** Attempt records, request lookup and usage stats (src/records). */
export interface RecordsConfig {
  /** How long a request stays resolvable by its support reference. */
  recordRetentionDays: number
  /** Below this many requests served in a window, stats answer hasSufficientVolume: false. */
  statsMinRequests: number
}

function loadRecordsConfig(env: Env): RecordsConfig {
  return {
    recordRetentionDays: integer(env, 'SVC_RECORD_RETENTION_DAYS', 30, 1, 3_650),
    statsMinRequests: integer(env, 'SVC_STATS_MIN_REQUESTS', 50, 1, 1_000_000_000),
  }
}

const MIB = 1024 * 1024

function loadInferenceConfig(env: Env): InferenceConfig {
  return {
    defaultMaxTokens: integer(env, 'SVC_DEFAULT_MAX_TOKENS', 4_096, 1, 1_000_000),
    upstreamTimeoutMs: integer(env, 'SVC_UPSTREAM_TIMEOUT_MS', 300_000, 100, 3_600_000),
    firstByteTimeoutMs: integer(env, 'SVC_FIRST_BYTE_TIMEOUT_MS', 30_000, 50, 600_000),
    streamIdleMs: integer(env, 'SVC_STREAM_IDLE_MS', 60_000, 100, 3_600_000),
    streamMaxMs: integer(env, 'SVC_STREAM_MAX_MS', 3_600_000, 1_000, 86_400_000),
    keepAliveMs: integer(env, 'SVC_KEEPALIVE_MS', 15_000, 50, 600_000),
    streamClearWaitMs: integer(env, 'SVC_STREAM_SETTLE_WAIT_MS', 30_000, 0, 600_000),
    videoJobTtlMs: integer(env, 'SVC_VIDEO_JOB_TTL_SECONDS', 3_600, 1, 7 * 86_400) * 1000,
    shutdownGraceMs: integer(env, 'SVC_SHUTDOWN_GRACE_MS', 30_000, 0, 3_600_000),
    maxUpstreamBodyBytes: integer(env, 'SVC_MAX_UPSTREAM_BODY_BYTES', 32 * MIB, 1024, 1024 * MIB),
    maxUpstreamFrameBytes: integer(env, 'SVC_MAX_UPSTREAM_FRAME_BYTES', MIB, 1024, 64 * MIB),
    maxUpstreamStreamBytes: integer(env, 'SVC_MAX_UPSTREAM_STREAM_BYTES', 256 * MIB, 1024, 4096 * MIB),
    maxUpstreamVideoBytes: integer(env, 'SVC_MAX_UPSTREAM_VIDEO_BYTES', 128 * MIB, 1024, 1024 * MIB),
  }
}

// 32 bytes as 64 hex characters or as base64: the AES-256-GCM key for upstream keys at rest.
export function masterKey(env: Env = process.env): Uint8Array {
  const expected = '32 bytes as 64 hex characters or base64 (openssl rand -hex 32)'
  const raw = required(env, 'SVC_MASTER_KEY', expected)
  let bytes: Uint8Array
  if (/^[0-9a-fA-F]{64}$/.test(raw)) bytes = Uint8Array.from(Buffer.from(raw, 'hex'))
  else if (/^[A-Za-z0-9+/_-]{43}=?$/.test(raw)) bytes = Uint8Array.from(Buffer.from(raw, 'base64'))
  else throw new ConfigError('SVC_MASTER_KEY', expected)
  if (bytes.length !== 32) throw new ConfigError('SVC_MASTER_KEY', expected)
  return bytes
}

function keyPrefix(env: Env): string {
  const prefix = read(env, 'SVC_REDIS_PREFIX') ?? 'svc:{m}'
  if (!/^[A-Za-z0-9:_-]*\{[A-Za-z0-9_-]+\}[A-Za-z0-9:_-]*$/.test(prefix)) {
    throw new ConfigError('SVC_REDIS_PREFIX', 'a key prefix holding one {hash-tag}, such as svc:{m}')
  }
  return prefix
}

/** What the operator CLI needs: the store and account defaults, none of the gateway's secrets. */
export interface StoreConfig {
  redisUrl: string
  redisPrefix: string
  defaultMaxPriceCents: number
}

export function loadStoreConfig(env: Env = process.env): StoreConfig {
  return {
    redisUrl: redisUrl(env),
    redisPrefix: keyPrefix(env),
    defaultMaxPriceCents: integer(env, 'SVC_DEFAULT_MAX_PRICE_CENTS', 50, 30, 80),
  }
}

export function loadGatewayConfig(env: Env = process.env): GatewayConfig {
  refuseUnset(env, ['REDIS_URL', 'SVC_ADMIN_TOKEN', 'SVC_MASTER_KEY', 'SVC_UPSTREAM_URL']) // demo sets each
  // Sent as a Bearer token, one run of visible ASCII: a token with a space could never be sent.
  const tokenRule = 'a secret of at least 24 visible ASCII characters, no spaces'
  const adminToken = required(env, 'SVC_ADMIN_TOKEN', tokenRule)
  if (!/^[\x21-\x7E]{24,}$/.test(adminToken)) throw new ConfigError('SVC_ADMIN_TOKEN', tokenRule)
  const redisPrefix = keyPrefix(env)
  const port = integer(env, 'PORT', 8080, 0, 65535)
  const funding = loadFundingConfig(env)
  return {
    port,
    host: read(env, 'HOST') ?? '0.0.0.0',
    redisUrl: redisUrl(env),
    redisPrefix,
    redisLayout: oneOf(env, 'SVC_REDIS_LAYOUT', LAYOUTS, 'one-slot'),
    adminToken,
    masterKey: masterKey(env),
    upstreamUrl: url(env, 'SVC_UPSTREAM_URL', ['http:', 'https:']),
    upstreamApiKey: read(env, 'SVC_UPSTREAM_API_KEY'),
    publicUrl: url(env, 'SVC_PUBLIC_URL', ['http:', 'https:'], `http://localhost:${port}`),
    siweNoncesPerMinute: integer(env, 'SVC_SIWE_NONCES_PER_MINUTE', 600, 1, 1_000_000),
    siweNoncesPerClientPerMinute: integer(env, 'SVC_SIWE_NONCES_PER_CLIENT_PER_MINUTE', 60, 1, 1_000_000),
    supplierKeyChecksPerMinute: integer(env, 'SVC_SUPPLIER_KEY_CHECKS_PER_MINUTE', 10, 1, 1_000_000),
    keyChecksPerMinuteTotal: integer(env, 'SVC_KEY_CHECKS_PER_MINUTE_TOTAL', 120, 1, 1_000_000),
    defaultMaxPriceCents: integer(env, 'SVC_DEFAULT_MAX_PRICE_CENTS', 50, 30, 80),
    catalogSyncSeconds: integer(env, 'SVC_CATALOG_SYNC_SECONDS', 300, 5, 86_400),
    disabledModels: (read(env, 'SVC_DISABLED_MODELS') ?? '')
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean),
    logLevel: oneOf(env, 'LOG_LEVEL', LOG_LEVELS, 'info'),
    maxBodyBytes: integer(env, 'SVC_MAX_BODY_BYTES', 8 * 1024 * 1024, 1024, 256 * 1024 * 1024),
    market: loadMarketConfig(env),
    inference: loadInferenceConfig(env),
    records: loadRecordsConfig(env),
    funding,
    payouts: loadPayoutConfig(env, funding),
    webhooks: {
      allowLoopback: oneOf(env, 'SVC_WEBHOOK_ALLOW_LOOPBACK', ['0', '1'], '0') === '1',
      timeoutMs: integer(env, 'SVC_WEBHOOK_TIMEOUT_MS', 5_000, 100, 30_000),
      backoffMs: integer(env, 'SVC_WEBHOOK_BACKOFF_MS', 10_000, 100, 3_600_000),
      maxAttempts: integer(env, 'SVC_WEBHOOK_MAX_ATTEMPTS', 8, 1, 20),
      pollMs: integer(env, 'SVC_WEBHOOK_POLL_MS', 1_000, 50, 60_000),
    },
  }
}

// --- Funding (x402). Optional as a group: absent, the funding routes answer 404; any one of them
// set, the rest are required and checked like every other variable.

export const X402_NETWORKS = ['base', 'base-sepolia'] as const
export type X402Network = (typeof X402_NETWORKS)[number]

// USDC on each network and its EIP-712 domain (the values the x402 packages ship), overridable.
const USDC_DEFAULTS: Record<X402Network, { address: string; name: string; version: string }> = {
  base: { address: '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913', name: 'USD Coin', version: '2' },
  'base-sepolia': { address: '0x036CbD53842c5426634e7929541eC2318f3dCF7e', name: 'USDC', version: '2' },
}

const FUNDING_VARIABLES = [
  'SVC_X402_NETWORK',
  'SVC_CHAIN_RPC_URL',
  'SVC_USDC_ADDRESS',
  'SVC_PAY_TO',
  'SVC_RELAYER_PRIVATE_KEY',
  'SVC_FACILITATOR_URL',
]

export interface FundingConfig {
  network: X402Network
  chainRpcUrl: string
  usdcAddress: `0x${string}`
  usdcName: string
  usdcVersion: string
  payTo: `0x${string}`
  /** The self-facilitator's key (it pays gas); exactly one of this and facilitatorUrl is set. */
  relayerPrivateKey: `0x${string}` | undefined
  /** How long a relayer transaction may stay unmined before it is signed again with a higher fee. */
  relayerBumpAfterMs: number
  /** The highest max fee per gas (wei) a relayer transaction is signed again at. */
  relayerMaxFeeWei: bigint
  facilitatorUrl: string | undefined
  confirmations: number
  receiptTimeoutMs: number
  /** Settlement calls allowed per minute on signup, across every replica (the global fuse). */
  signupFusePerMinute: number
  /** The fuse's clock (ms); unset, the wall clock. Never from the environment: tests set it. */
  fuseClock?: () => number
  watchIntervalMs: number
  /** The terms' maxTimeoutSeconds, and how far ahead an authorization's validBefore may lie. */
  maxTimeoutSeconds: number
}

function address(env: Env, name: string, fallback?: string): `0x${string}` {
  const raw = read(env, name) ?? fallback
  if (raw === undefined || !/^0x[0-9a-fA-F]{40}$/.test(raw)) {
    throw new ConfigError(name, 'a 0x-prefixed 20-byte hex address')
  }
  return raw as `0x${string}`
}

/** The funding network's variables (also read by `audit --chain`); undefined when none is set. */
export function loadFundingConfig(env: Env = process.env): FundingConfig | undefined {
  if (!FUNDING_VARIABLES.some((name) => read(env, name) !== undefined)) return undefined
  if (read(env, 'SVC_X402_NETWORK') === undefined) {
    throw new ConfigError('SVC_X402_NETWORK', 'one of base, base-sepolia')
  }
  const network = oneOf(env, 'SVC_X402_NETWORK', X402_NETWORKS, 'base')
  const usdc = USDC_DEFAULTS[network]
  const relayerPrivateKey = read(env, 'SVC_RELAYER_PRIVATE_KEY')
  if (relayerPrivateKey !== undefined && !/^0x[0-9a-fA-F]{64}$/.test(relayerPrivateKey)) {
    throw new ConfigError('SVC_RELAYER_PRIVATE_KEY', 'a 0x-prefixed 32-byte hex private key')
  }
  const facilitatorUrl = read(env, 'SVC_FACILITATOR_URL')
  if ((relayerPrivateKey === undefined) === (facilitatorUrl === undefined)) {
    throw new ConfigError(
      'SVC_RELAYER_PRIVATE_KEY',
      'set, or else SVC_FACILITATOR_URL (exactly one of the two)',
    )
  }
  return {
    network,
    chainRpcUrl: url(env, 'SVC_CHAIN_RPC_URL', ['http:', 'https:']),
    usdcAddress: address(env, 'SVC_USDC_ADDRESS', usdc.address),
    usdcName: read(env, 'SVC_USDC_NAME') ?? usdc.name,
    usdcVersion: read(env, 'SVC_USDC_VERSION') ?? usdc.version,
    payTo: address(env, 'SVC_PAY_TO'),
    relayerPrivateKey: relayerPrivateKey as `0x${string}` | undefined,
    relayerBumpAfterMs: integer(env, 'SVC_RELAYER_BUMP_MS', 20_000, 100, 86_400_000),
    // six decimals of gwei: micro-gwei, a thousand wei each
    relayerMaxFeeWei: BigInt(sixDecimals(env, 'SVC_RELAYER_MAX_FEE_GWEI', '10.000000')) * 1_000n,
    facilitatorUrl:
      facilitatorUrl === undefined ? undefined : url(env, 'SVC_FACILITATOR_URL', ['http:', 'https:']),
    confirmations: integer(env, 'SVC_CONFIRMATIONS', 3, 0, 1000),
    receiptTimeoutMs: integer(env, 'SVC_X402_RECEIPT_TIMEOUT_MS', 30_000, 50, 600_000),
    signupFusePerMinute: integer(env, 'SVC_X402_SIGNUP_FUSE_PER_MINUTE', 120, 1, 1_000_000),
    watchIntervalMs: integer(env, 'SVC_X402_WATCH_INTERVAL_MS', 2_000, 20, 600_000),
    maxTimeoutSeconds: integer(env, 'SVC_X402_MAX_TIMEOUT_SECONDS', 300, 30, 86_400),
  }
}
