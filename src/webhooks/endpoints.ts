// An owner's webhook endpoints: register (URL checked public after DNS, secret made here, sealed
// under SVC_MASTER_KEY and shown once), list, remove, disable and enable, rotate the secret
// (rotation.ts). Registration, removal and a change of state or secret are one script each
// (lua/webhook-put.lua, webhook-delete.lua, webhook-state.lua); a refusal writes nothing.
import { randomBytes } from 'node:crypto'
import type { WebhookConfig } from '../config.ts'
import { ApiError, badRequest, notFound } from '../errors.ts'
import { decryptUpstreamKey, encryptUpstreamKey } from '../market/upstream-key-crypto.ts'
import { formatMicros, parseMicros } from '../money/units.ts'
import type { Keyspace } from '../redis/keys.ts'
import { runScript } from '../redis/scripts.ts'
import type { Store } from '../redis/store.ts'
import {
  type AddressPolicy,
  parseWebhookUrl,
  resolvePublicAddress,
  WEBHOOK_URL_MAX,
} from './address-check.ts'
import { WebhookDeliveries } from './delivery.ts'
import { DELIVERY_GROUP, eventsFor, type Owner } from './events.ts'
import { type RotatedFields, replayOf, rotated, signingPrevious } from './rotation.ts'

export const MAX_WEBHOOKS_PER_OWNER = 5
export const WEBHOOK_ID = /^wh_[0-9a-f]{24}$/

/** An endpoint as stored: the secret sealed (and those it replaced), the threshold in micro-USDC. */
export interface StoredEndpoint extends RotatedFields {
  id: string
  url: string
  events: string[]
  threshold: number | null
  sealedSecret: string
  createdAt: number
  /** Set while no event is sent to it: after it answered 410 Gone, or by its owner. */
  disabled?: EndpointDisabled | null
}

/** Why and since when (ms) an endpoint is disabled. */
export interface EndpointDisabled {
  reason: string
  at: number
}

/** The reasons an endpoint is disabled for. */
export const DISABLED_GONE = 'answered 410 Gone'
export const DISABLED_BY_OWNER = 'disabled by its owner'

export interface EndpointInput {
  url: string
  events: string[]
  balanceThresholdUsdc?: string
}

export function endpointView(endpoint: StoredEndpoint) {
  return {
    id: endpoint.id,
    url: endpoint.url,
    events: endpoint.events,
    balanceThresholdUsdc: endpoint.threshold === null ? null : formatMicros(endpoint.threshold),
    createdAt: endpoint.createdAt,
    disabled: endpoint.disabled ?? null,
    secretRotatedAt: endpoint.rotation?.at ?? null,
    // When the last of the secrets it replaced stops signing; null while only the current one signs.
    previousSecretsSignUntil:
      Math.max(0, ...signingPrevious(endpoint, Date.now()).map((previous) => previous.until)) || null,
  }
}

/** A fresh secret, in standard base64 as Standard Webhooks libraries decode it (base64url's - and _ they refuse). */
const newSecret = () => `whsec_${randomBytes(32).toString('base64')}`

export class WebhookStore {
  constructor(
    private readonly store: Store,
    private readonly keys: Keyspace,
    private readonly masterKey: Uint8Array,
    private readonly policy: AddressPolicy,
  ) {}

  async create(owner: Owner, input: EndpointInput) {
    const events = [...new Set(input.events)]
    const allowed = eventsFor(owner)
    const unknown = events.filter((type) => !allowed.includes(type))
    if (events.length === 0 || unknown.length > 0)
      throw badRequest(`events must be a non-empty list of: ${allowed.join(', ')}`, 'invalid_events')
    let threshold: number | null = null
    if (input.balanceThresholdUsdc !== undefined) {
      threshold = parseMicros(input.balanceThresholdUsdc)
      if (typeof input.balanceThresholdUsdc !== 'string' || threshold === null || threshold <= 0)
        throw badRequest('balanceThresholdUsdc must be a positive decimal string (e.g. "5.000000")')
    }
    if (events.includes('balance.low') !== (threshold !== null))
      throw badRequest('balance.low and balanceThresholdUsdc go together: send both or neither')
    if (input.url.length > WEBHOOK_URL_MAX)
      throw badRequest(`url must be at most ${WEBHOOK_URL_MAX} characters`)
    const url = parseWebhookUrl(input.url)
    await resolvePublicAddress(url, this.policy)

    const secret = newSecret()
    const endpoint: StoredEndpoint = {
      id: `wh_${randomBytes(12).toString('hex')}`,
      url: url.href,
      events,
      threshold,
      sealedSecret: encryptUpstreamKey(this.masterKey, secret),
      createdAt: Date.now(),
    }
    const own = [
      this.keys.webhooks(owner),
      this.keys.webhookHooks(owner),
      this.keys.webhookEvents(owner),
      this.keys.webhookOwnerHash(owner),
    ]
    const apart = this.keys.layout === 'apart'
    // Held apart, the owners' list is on another slot: the owner is listed first, so an endpoint
    // is never written that no consumer reads; so is the due set its events flag it in.
    if (apart) {
      await this.store.sadd(this.keys.webhookOwners, owner)
      await this.store.sadd(this.keys.webhookDueSets, this.keys.webhookDue(owner))
    }
    const result = (await runScript(
      this.store,
      'webhookPut',
      apart ? own : [...own, this.keys.webhookOwners],
      {
        endpointId: endpoint.id,
        endpoint: JSON.stringify(endpoint),
        maxEndpoints: MAX_WEBHOOKS_PER_OWNER,
        owner,
        balanceThreshold: threshold === null ? '' : threshold,
        group: DELIVERY_GROUP,
      },
      events,
    )) as [number]
    if (result[0] === -1)
      throw new ApiError(
        409,
        'too_many_webhooks',
        `at most ${MAX_WEBHOOKS_PER_OWNER} webhook endpoints per owner`,
      )
    // The one and only time the secret leaves the gateway.
    return { ...endpointView(endpoint), secret }
  }

  async list(owner: Owner): Promise<StoredEndpoint[]> {
    const all = await this.store.hvals(this.keys.webhooks(owner))
    return all.map((json) => JSON.parse(json) as StoredEndpoint).sort((a, b) => a.createdAt - b.createdAt)
  }

  async get(owner: Owner, id: string): Promise<StoredEndpoint> {
    const json = WEBHOOK_ID.test(id) ? await this.store.hget(this.keys.webhooks(owner), id) : null
    if (!json) throw notFound('no such webhook endpoint', 'webhook_not_found')
    return JSON.parse(json) as StoredEndpoint
  }

  async remove(owner: Owner, id: string): Promise<void> {
    // The id names keys the script deletes: only an id of ours' shape reaches it.
    if (!WEBHOOK_ID.test(id)) throw notFound('no such webhook endpoint', 'webhook_not_found')
    const result = (await runScript(
      this.store,
      'webhookDelete',
      [
        this.keys.webhooks(owner),
        this.keys.webhookHooks(owner),
        this.keys.webhookOwnerHash(owner),
        this.keys.webhookLog(owner, id),
        this.keys.webhookTries(owner, id),
        ...(this.keys.layout === 'apart' ? [] : [this.keys.webhookOwners]),
      ],
      { endpointId: id, owner },
    )) as [number]
    if (result[0] !== 1) throw notFound('no such webhook endpoint', 'webhook_not_found')
  }

  /**
   * Disables the endpoint (`reason`) or enables it again (null): answers it as now stored. Already
   * so, it is left as it is: the first reason and its time are kept.
   */
  setDisabled(owner: Owner, id: string, reason: string | null): Promise<StoredEndpoint> {
    return this.change(owner, id, (endpoint) =>
      Boolean(endpoint.disabled) === (reason !== null)
        ? null
        : { ...endpoint, disabled: reason === null ? null : { reason, at: Date.now() } },
    )
  }

  /**
   * A new signing secret for the endpoint, answered once (as at registration); the secrets it
   * replaces sign beside it as previous secrets for `overlapSeconds`. `key` is the Idempotency-Key's digest, or null:
   * a retry with the same key answers the secret it made (`replayed`) and rotates nothing more.
   */
  async rotateSecret(owner: Owner, id: string, overlapSeconds: number, key: string | null) {
    let replayed = false
    const endpoint = await this.change(owner, id, (endpoint) => {
      replayed = replayOf(endpoint, key, overlapSeconds) === 'replay'
      if (replayed) return null
      const sealed = encryptUpstreamKey(this.masterKey, newSecret())
      return rotated(endpoint, sealed, { at: Date.now(), overlapSeconds, key })
    })
    return { endpoint: { ...endpointView(endpoint), secret: this.secretOf(endpoint) }, replayed }
  }

  /**
   * Replaces the endpoint's record by `next` of it (null: left as it is) and answers it as now
   * stored. Written only over the record as read: one changed meanwhile is read again; one removed
   * is a 404.
   */
  private async change(
    owner: Owner,
    id: string,
    next: (endpoint: StoredEndpoint) => StoredEndpoint | null,
  ): Promise<StoredEndpoint> {
    for (;;) {
      const json = WEBHOOK_ID.test(id) ? await this.store.hget(this.keys.webhooks(owner), id) : null
      if (!json) throw notFound('no such webhook endpoint', 'webhook_not_found')
      const endpoint = JSON.parse(json) as StoredEndpoint
      const changed = next(endpoint)
      if (changed === null) return endpoint
      const result = (await runScript(this.store, 'webhookState', [this.keys.webhooks(owner)], {
        endpointId: id,
        expected: json,
        endpoint: JSON.stringify(changed),
      })) as [number]
      if (result[0] === 1) return changed
      if (result[0] === 0) throw notFound('no such webhook endpoint', 'webhook_not_found')
    }
  }

  /** The endpoint's current signing secret. */
  secretOf(endpoint: StoredEndpoint): string {
    return decryptUpstreamKey(this.masterKey, endpoint.sealedSecret)
  }

  /**
   * The secrets a try is signed with, as stored when it is sent (a rotation since the endpoint was
   * read counts at once): the current one, then the previous secrets still in their overlap.
   */
  async signingSecrets(owner: Owner, endpoint: StoredEndpoint): Promise<string[]> {
    const json = await this.store.hget(this.keys.webhooks(owner), endpoint.id)
    const now = json ? (JSON.parse(json) as StoredEndpoint) : endpoint
    return [
      now.sealedSecret,
      ...signingPrevious(now, Date.now()).map((previous) => previous.sealedSecret),
    ].map((sealed) => decryptUpstreamKey(this.masterKey, sealed))
  }
}

/** The store and the deliveries a replica's routes and consumer share. */
export function webhookParts(store: Store, keys: Keyspace, masterKey: Uint8Array, config: WebhookConfig) {
  const webhooks = new WebhookStore(store, keys, masterKey, config)
  return { webhooks, deliveries: new WebhookDeliveries(store, keys, webhooks, config) }
}
