// Every Redis key is named here (the on-chain senders' in onchain-keys.ts, included below) and
// nowhere else. All of them share the prefix's one hash tag, so every Lua script's keys land in one
// slot: the same code runs on a single Redis, Sentinel and Cluster. A market held apart (layout
// 'apart') names an account's keys under its shard's tag instead (see ownerPrefix), so that a Cluster
// spreads accounts over its masters; the indexes stay on the prefix's. Money fields are integer
// strings: micro-USDC for accounts, micro-DIEM for capacity.
import { createHash } from 'node:crypto'
import { onChainKeys } from './onchain-keys.ts'

/** 'one-slot': every key under the prefix's tag. 'apart': each owner's keys under a tag of its own. */
export type Layout = 'one-slot' | 'apart'

/**
 * An owner's prefix: the prefix's own tag, if any, kept inside the owner's (`svc:{m}` gives
 * `svc:{m/a.3f2}` for an account's shard, `svc:{m/o.<offer id>}` for an offer), so two prefixes
 * never share an owner's keys.
 */
export function ownerPrefix(prefix: string, owner: string): string {
  return /\{[^}]*\}/.test(prefix) ? prefix.replace(/\{([^}]*)\}/, `{$1/${owner}}`) : `${prefix}:{${owner}}`
}

/**
 * The value of every account hash's `table` field. Longer than Redis's hash-max-listpack-value (64
 * bytes unless an operator raised it), it makes the hash a hash table from its first write: the
 * fields admit and clear read and write on every request are then found by their hash, where a
 * listpack is walked from its start (BENCHMARKS.md, "The account hash as a hash table").
 */
export const ACCOUNT_TABLE = 'a hash table: this value is longer than hash-max-listpack-value (64 bytes)'

/** The shard of an account: one of 4,096, by its id's hash. */
export function accountShard(accountId: string): string {
  return createHash('sha1').update(accountId).digest('hex').slice(0, 3)
}

/** Every account shard's name, 000 to fff. */
export const ACCOUNT_SHARDS: readonly string[] = Array.from({ length: 4096 }, (_, i) =>
  i.toString(16).padStart(3, '0'),
)

/**
 * Each account shard's own keyspace, 000 to fff: held apart, where what a shard's scripts keep
 * beside its accounts (the clear's totals, write-offs, ended attempts) is found.
 */
export function accountShardKeyspaces(prefix: string) {
  return ACCOUNT_SHARDS.map((shard) => keyspace(ownerPrefix(prefix, `a.${shard}`)))
}

export function keyspace(prefix: string, layout: Layout = 'one-slot') {
  const key = (suffix: string) => `${prefix}:${suffix}`
  // Where an account's own keys live: under the prefix, or under its shard's tag when held apart.
  const accountKey =
    layout === 'apart'
      ? (accountId: string, suffix: string) =>
          `${ownerPrefix(prefix, `a.${accountShard(accountId)}`)}:${suffix}`
      : (_accountId: string, suffix: string) => key(suffix)
  // Where an offer's own keys live: under the prefix, or under the offer's own tag when held apart.
  const offerKey =
    layout === 'apart'
      ? (offerId: string, suffix: string) => `${ownerPrefix(prefix, `o.${offerId}`)}:${suffix}`
      : (_offerId: string, suffix: string) => key(suffix)
  // A webhook owner's keys: an account's (`acct:<id>`) live with the account's.
  const ownerKey = (owner: string, suffix: string) =>
    owner.startsWith('acct:') ? accountKey(owner.slice(5), `${owner}:${suffix}`) : key(`${owner}:${suffix}`)
  return {
    prefix,
    layout,
    /** The keyspace base of an account's own keys (its shard's when held apart): what its scripts are passed. */
    accountBase: (accountId: string) => accountKey(accountId, ''),
    /** hash: model id -> catalog entry JSON */
    catalog: key('catalog'),
    /** hash: syncedAt (ms), source, count */
    catalogMeta: key('catalog:meta'),
    /** string, with a ttl: the replica that syncs the catalog this period (src/catalog/sync.ts) */
    catalogSyncClaim: key('catalog:sync-claim'),

    // Funding (x402). A payment is known by its chain, transaction and authorization, an
    // authorization by its chain, token, payer and nonce; each is credited at most once
    // (lua/credit-payment.lua).
    /**
     * hash, one per credited payment (<chainId>:<txHash>:<payer>:<nonce>, lower case; one recorded
     * before a transaction could carry several payments is <chainId>:<txHash>, still read): accountId, amount, state (pending|confirmed),
     * blockNumber, authorization. Kept for ever, as the credit is: the audit sums an account's funded
     * from these records, and a late credit of its transaction finds it and credits nothing.
     */
    payment: (paymentId: string) => key(`x402:payment:${paymentId}`),
    /**
     * hash, one per authorization (<chainId>:<token>:<payer>:<nonce>, lower case): state
     * (claimed|sent|credited|taken back|expired|canceled), tx, accountId, payer, amount, kind,
     * claimedAt, canceledTx (the payer's cancellation, seen by the request while in flight). A claim the chain shows expired unused or canceled by the payer is released, kept
     * marked so for the record retention past its validBefore (lua/release-payment.lua): a late
     * credit of a lost fork's transaction and a replay are refused by it. A credited one is kept for
     * ever, as its payment is: it names the payment the money went to, which a replay, a late credit
     * of another transaction and the audit read. One whose payment was taken back
     * (lua/take-back-payment.lua) is kept as long, marked so, refusing the same.
     */
    authorization: (authorizationId: string) => key(`x402:auth:${authorizationId}`),
    /** zset: authorization ids claimed or sent but not yet credited, scored by claim time (ms): the reconciler's work */
    paymentsInFlight: key('x402:inflight'),
    /** zset: payment ids credited as pending, scored by block number: the confirmations watcher's work */
    paymentsUnconfirmed: key('x402:unconfirmed'),
    /**
     * string, one per payment moved to another transaction (lua/move-payment.lua): the payment id it
     * moved to, for the record retention. Only a lookup by the old transaction reads it: a late
     * credit, move or take-back of the old id is refused by the authorization's record, which names
     * the new payment, and the chain uses the authorization once.
     */
    paymentMovedTo: (paymentId: string) => key(`x402:moved:${paymentId}`),
    /**
     * hash, one per pending payment taken back (lua/take-back-payment.lua): amount (micro-USDC), at
     * (ms), for the record retention. Only a lookup by its transaction reads it: taken back once its
     * authorization expired unused, so no replay of it settles again, on chain or here.
     */
    paymentReversed: (paymentId: string) => key(`x402:reversed:${paymentId}`),
    /**
     * set, one per transaction that payments were credited from or moved to (<chainId>:<txHash>):
     * their payment ids, kept for ever as they are. Only a lookup by transaction reads it.
     */
    transactionPayments: (transaction: string) => key(`x402:tx:${transaction}`),
    /** string counter per minute: signup settlement calls, the global fuse */
    signupFuse: (minute: number) => key(`x402:fuse:${minute}`),

    /**
     * hash, one per account: id, wallet (checksummed), createdAt (ms), maxPriceCents,
     * and micro-USDC: confirmed (spendable), pending, held, spent, funded, writtenOff; per API key
     * (revoked ones too) limit:<keyId> (its spending limit, absent for none), spent:<keyId> and
     * held:<keyId> (what was charged through it and what its requests in flight hold); for a
     * periodic limit reset:<keyId> (daily, weekly, monthly), pstart:<keyId> (the start, ms, of
     * the period it last counted) and pspent:<keyId> (what was charged in that period). The
     * requests in flight: inflight (the account's), inflight:<keyId> (each key's), group:<name>
     * (a cap group's, e.g. group:img), kept by admit and the scripts that end an attempt. table:
     * ACCOUNT_TABLE, from its creation.
     * Invariant: funded = confirmed + pending + held + spent (writtenOff is outside it).
     */
    account: (accountId: string) => accountKey(accountId, `acct:${accountId}`),
    /** hash: API key id (UUID) -> SHA-256 hex digest of the key, for the account's active keys */
    accountKeys: (accountId: string) => accountKey(accountId, `acct:${accountId}:keys`),
    /**
     * hash, in a market held apart: payment id -> pending | confirmed, each payment credited to the
     * account (lua/credit-pending.lua, confirm-pending.lua), so a payment moves its balance once
     */
    accountPayments: (accountId: string) => accountKey(accountId, `acct:${accountId}:payments`),
    /** string: the market's layout, 'one-slot' or 'apart', recorded by the first gateway (src/redis/layout.ts) */
    layoutRecord: key('layout'),
    /** set: every account id (for the audit) */
    accounts: key('accounts'),
    /** hash: lower-case wallet address -> account id */
    wallets: key('wallets'),
    /** hash, one per active API key, by SHA-256 hex of the plaintext: id, accountId, name, prefix, createdAt, lastUsedAt */
    apiKey: (digest: string) => key(`apikey:${digest}`),
    /** The base the market's Lua scripts are passed; lua/lib/keys.lua builds the names below from it. */
    base: `${prefix}:`,
    /** hash, one per offer: see lua/offer-put.lua for its fields (money in micro-DIEM / micro-USDC) */
    offer: (offerId: string) => offerKey(offerId, `offer:${offerId}`),
    /** The keyspace base of an offer's own keys (its own tag's when held apart): what its scripts are passed. */
    offerBase: (offerId: string) => offerKey(offerId, ''),
    /** set: every offer id ever posted (deleted ones too, for the audit) */
    offers: key('offers'),
    /**
     * string, one per Idempotency-Key an operator's offer create used (SHA-256 hex of it) ->
     * "<HMAC of the create's fields> <offer id>". Kept for ever, as the offer's hash is.
     */
    offerCreateKey: (digest: string) => key(`offers:create-key:${digest}`),
    /** zset: active offers, scored ask * 1e9 + posting order */
    ladder: key('ladder'),
    /**
     * zset, on one slot: the active offers at their in-flight cap, off the ladder until a slot frees
     * (lua/lib/ladder.lua), scored as on the ladder; held apart, none
     */
    full: key('ladder:full'),
    /**
     * zset, on one slot: the active offers whose remaining capacity (capacity - burned - held) is
     * below the market's minimum (`minRoutable` on the market hash), off the ladder until it rises
     * (lua/lib/ladder.lua), scored as on the ladder; held apart, none
     */
    dry: key('ladder:dry'),
    /**
     * zsets, on one slot, nested: tier t (1..3) holds the ladder's offers with at least
     * TIER_FLOORS[t] (lua/lib/ladder.lua) of capacity not yet burned (capacity - burned), scored as
     * on the ladder; a request whose hold is at least a tier's floor walks that tier; held apart, none
     */
    tiers: [key('ladder:tier:1'), key('ladder:tier:2'), key('ladder:tier:3')],
    /** zset: attempt id -> lease deadline (ms, Redis time); a reservation's too, held apart */
    leases: key('leases:2'),
    /**
     * zset: the same for attempts admitted before their record was packed (lua/lib/keys.lua: a
     * gateway from before reaps only this one, and so never meets a packed attempt)
     */
    earlierLeases: key('leases'),
    /**
     * hash, one per attempt (`<support reference>.<n>`): its hold, offer, state
     * (admitted|cleared|released|reaped, or refused when admission refused the request), cost, in
     * two packed fields (lua/lib/record.lua; read by src/records/attempt-fields.ts). An ended
     * attempt is its request's record (src/records/lookup.ts); it expires by retention.
     */
    attempt: (attemptId: string) => key(`attempt:${attemptId}`),
    /** An account's attempt, where its account's keys are (its shard's, when held apart). */
    accountAttempt: (accountId: string, attemptId: string) => accountKey(accountId, `attempt:${attemptId}`),
    /**
     * hash, one per attempt whose offer was reserved apart from its account's hold (on a Cluster,
     * under the offer's base; lua/reserve.lua): state (reserved|posted|voided), offerId, accountId,
     * holdDiem, askCents (no time of its own: its attempt's record has it); then burnDiem,
     * earnedUsdc, feeUsdc once posted.
     */
    reservation: (attemptId: string) => key(`reservation:${attemptId}`),
    /**
     * hash: offerSeq, the posting order of offers (ties on the ladder break by it), and the market's
     * running totals kept by lua/clear.lua: writtenOff (micro-USDC), disputed (micro-DIEM), and
     * held apart spent and fees (micro-USDC; on one slot the offers' earned and fees sum to them);
     * supplier earnings are spent - fees (src/market/totals.ts); held apart, ladderVersion, moved by
     * every change of the ladder or of an offer's standing (lua/lib/ladder.lua's ladder_moved);
     * minRoutable, the least remaining capacity an offer stands on the ladder with (micro-DIEM,
     * written by each replica at its start from SVC_MIN_ROUTABLE_MICRO_DIEM; absent: 0); drySwept,
     * the score the reaper's last page of the dry set ended at (lua/lib/ladder.lua's sweep_dry);
     * tierSwept, likewise of the ladder and the first capacity tier (sweep_tiers), set to -inf by
     * each replica at its start on one slot and held there while a build keeping no tiers is seen;
     * tiered, present while admit walks the tiers: set once that sweep read the ladder through,
     * cleared at each start and while such a build is seen (src/market/tiers.ts)
     */
    market: key('market'),
    /** zset: replica id -> when it last ran its reaper (ms): the replicas seen */
    replicas: key('replicas'),
    /**
     * zset: replica id -> its last reaper pass (ms), for the replicas whose build marks a revoked
     * key on its account (lua/revoke-key.lua): a replica seen in `replicas` and not here is of an
     * earlier build
     */
    replicasMarking: key('replicas:marking'),
    /**
     * zset: replica id -> its last reaper pass (ms), for the replicas whose build keeps the capacity
     * tiers (lua/lib/ladder.lua): a replica seen in `replicas` and not here puts offers on the
     * ladder in none, so they are not walked while it is seen (src/market/tiers.ts)
     */
    replicasTiering: key('replicas:tiering'),
    /** hash: the last reaper pass of any replica: at (ms), replica, reaped */
    reaperLastRun: key('reaper'),
    /** string: the replica that reaps for every replica now (it expires unless its holder reaps on) */
    reaperClaim: key('reaper:claim'),
    /**
     * hash: attempt id -> micro-USDC written off by its late clear (a result that came after its
     * lease was reaped, for more than the balance held then). Never trimmed: the audit lists them.
     */
    writeoffs: key('writeoffs'),

    /**
     * stream: every ended attempt of the account (cleared, released, reaped, refused), appended by
     * the script that ends it; trimmed by the record retention (XADD MINID ~). One field per entry,
     * e: attempt, account, key, status, costUsdc, askCents, inputTokens, outputTokens, offer,
     * errorCode and model joined (src/records/ended-entry.ts). GET /v1/agent/activity and /usage read it.
     */
    accountActivity: (accountId: string) => accountKey(accountId, `acct:${accountId}:activity`),
    /**
     * hash, beside the activity Stream: its entries folded so far per UTC hour and model, and the
     * cursor folded up to (lua/fold-sums.lua, src/records/stream-sums.ts): what GET /v1/agent/usage reads
     */
    accountUsage: (accountId: string) => accountKey(accountId, `acct:${accountId}:usage`),
    /**
     * stream: every ended attempt of the market, the same entries as the accounts' Streams, trimmed
     * to about ENDED_MAXLEN (lua/lib/attempts.lua: 1,000,000) entries. `svc-gateway export` tails it.
     * (Its Redis name, `settled`, predates the word; it stays so that no stream is left behind.)
     */
    endedAttempts: key('settled'),
    /** hash, one per UTC day (YYYY-MM-DD): model id -> requests served that day (counted by clear) */
    statsDay: (day: string) => key(`stats:${day}`),
    /** hash, held apart: the same counts for the requests an offer served, on the offer's own slot */
    offerStatsDay: (offerId: string, day: string) => offerKey(offerId, `stats:${day}`),
    /** string: the capacity snapshot JSON for one max price, cached 30 s for every replica */
    capacitySnapshot: (maxPriceCents: number | 'all') => key(`capacity:${maxPriceCents}`),
    /** string: GET /v1/models/stats's answer for a window, shared by the replicas (src/records/stats.ts) */
    statsSnapshot: (window: string) => key(`stats:snapshot:${window}`),
    /** hash, one per video job: its attempt, owner, upstream queue id, state (queued|completed|refunded|expired) */
    videoJob: (jobId: string) => key(`video:${jobId}`),
    // Suppliers: identity, keys and offers (self-served offers carry supplierId on the offer hash).
    /** hash, one per supplier: id, wallet (checksummed), status (active|suspended), createdAt (ms), paidOut, pending (micro-USDC), signins (sign-ins so far: orders the keys they minted) */
    supplier: (supplierId: string) => key(`supplier:${supplierId}`),
    /** set: every supplier id */
    suppliers: key('suppliers'),
    /** hash: lower-case wallet address -> supplier id (one supplier per wallet) */
    supplierWallets: key('supplierWallets'),
    /** set: every offer id the supplier ever posted (deleted ones too) */
    supplierOffers: (supplierId: string) => key(`supplier:${supplierId}:offers`),
    /**
     * hash, held apart: what the market's slot knows of each of the supplier's offers, whose hashes
     * live on slots of their own (lua/index-offer.lua keeps it): <offer id> -> listed | active |
     * paused | deleted, score:<offer id> -> its ladder score, digest:<offer id> -> the upstream key
     * digest it claimed
     */
    supplierOfferStates: (supplierId: string) => key(`supplier:${supplierId}:offer-states`),
    /**
     * zset, held apart: offers listed on the market's slot whose creation has not placed them yet,
     * as `<offer id>:<supplier id or empty>`, scored by when they were listed (ms): the reaper
     * finishes or undoes each one left behind (src/market/offer-index.ts)
     */
    offersListing: key('offers:listing'),
    /** hash: supplier key id (UUID) -> SHA-256 hex digest of the key, for the supplier's active keys */
    supplierKeys: (supplierId: string) => key(`supplier:${supplierId}:keys`),
    /** hash, one per active supplier key, by SHA-256 hex of the plaintext: id, supplierId, name, prefix, createdAt, lastUsedAt, signin (the sign-in that minted it, by order; absent for keys minted by name) */
    supplierKey: (digest: string) => key(`supkey:${digest}`),
    /** string, one per Sign-In with Ethereum nonce: 5-minute TTL, deleted by the sign-in that uses it */
    siweNonce: (nonce: string) => key(`siwe:nonce:${nonce}`),
    /** string counter per minute: nonces issued, the fuse that bounds how many can be outstanding */
    siweNonceFuse: (minute: number) => key(`siwe:fuse:${minute}`),
    /** string counter per minute and client address: nonces it asked for, so one client cannot take the whole fuse */
    siweNonceClientFuse: (minute: number, client: string) => key(`siwe:client:${minute}:${client}`),
    /** string counter per minute and supplier: upstream key checks its offer posts asked for (the fuse in front of the upstream) */
    supplierKeyChecks: (minute: number, supplierId: string) =>
      key(`supplier:${supplierId}:key-checks:${minute}`),
    /** string counter per minute: upstream key checks of every supplier together (the market's ceiling) */
    keyChecks: (minute: number) => key(`key-checks:${minute}`),
    /** hash: SHA-256 hex of an upstream key -> the offer it stands in (one non-deleted offer per key) */
    upstreamKeys: key('upstreamKeys'),
    /**
     * stream: every clear on the supplier's offers, appended by lua/clear.lua; trimmed by the record
     * retention (XADD MINID ~). Fields: offer, model, burnDiem, askCents, earnedUsdc. Never a buyer.
     */
    supplierFills: (supplierId: string) => key(`supplier:${supplierId}:fills`),
    /** The fills of one of the supplier's offers: the supplier's stream, or held apart, one on the offer's slot (lua/post.lua). */
    offerFills: (offerId: string, supplierId: string) => offerKey(offerId, `supplier:${supplierId}:fills`),
    /** hash, beside a fills Stream (the supplier's, or held apart, an offer's): its sums, as accountUsage's */
    fillsSums: (fills: string) => `${fills}:sums`,

    ...onChainKeys(key),

    // Webhooks. An owner is `acct:<accountId>` or `supplier:<supplierId>`; its keys sit under its
    // own name, so they move with the owner when the market is sharded by owner.
    /** hash: endpoint id -> endpoint JSON (url, events, thresholdUsdc, sealed secret, createdAt) */
    webhooks: (owner: string) => ownerKey(owner, 'webhooks'),
    /** The owner's own hash (its account's or supplier's), whose hooks field counts its endpoints. */
    webhookOwnerHash: (owner: string) =>
      owner.startsWith('acct:') ? accountKey(owner.slice(5), owner) : key(owner),
    /**
     * hash the event-writing scripts read (lua/lib/events.lua): t:<event type> -> how many endpoints
     * subscribe to it, low:<endpoint id> -> that endpoint's balance threshold (micro-USDC)
     */
    webhookHooks: (owner: string) => ownerKey(owner, 'hooks'),
    /** stream: the owner's events (type, at, data JSON), read by the replicas' consumer group */
    webhookEvents: (owner: string) => ownerKey(owner, 'events'),
    /** list: an endpoint's delivery log, newest first, bounded (src/webhooks/delivery-log.ts) */
    webhookLog: (owner: string, endpointId: string) => ownerKey(owner, `webhook:${endpointId}:log`),
    /** hash: "<event id>" -> tries so far, "<event id>:end" -> delivered | failed, per endpoint */
    webhookTries: (owner: string, endpointId: string) => ownerKey(owner, `webhook:${endpointId}:tries`),
    /** set: every owner with an endpoint: the streams the delivery consumers sweep now and then */
    webhookOwners: key('webhooks:owners'),
    /**
     * set: owners whose stream may have an event to send, added by the script that writes the event
     * (lua/lib/events.lua), beside the owner's keys: an account's shard's set when held apart, the
     * prefix's otherwise. The consumers read only these owners between sweeps.
     */
    webhookDue: (owner: string) =>
      owner.startsWith('acct:') ? accountKey(owner.slice(5), 'webhooks:due') : key('webhooks:due'),
    /** set: the prefix's webhookDue set: every owner's in one slot, a supplier's when held apart */
    webhookDueOfPrefix: key('webhooks:due'),
    /** set: held apart, every webhookDue set an owner with an endpoint may be flagged in */
    webhookDueSets: key('webhooks:due-sets'),

    /** stream: operator actions (manual credits ...), never trimmed */
    audit: key('audit'),
    /**
     * stream: where an operator's action on one account is recorded, by the script that acts: the
     * audit stream, or, in a market held apart, the account's own (on its slot), never trimmed
     */
    /**
     * string, one per Idempotency-Key an operator's hand credit of the account used (SHA-256 hex of
     * it) -> "<amount> <audit entry id>". Kept for ever, as the credit is.
     */
    creditKey: (accountId: string, digest: string) =>
      accountKey(accountId, `acct:${accountId}:credit-key:${digest}`),
    auditOf: (accountId: string) =>
      layout === 'apart' ? accountKey(accountId, `acct:${accountId}:audit`) : key('audit'),
  }
}

export type Keyspace = ReturnType<typeof keyspace>
