// Sending one event to one endpoint, signed, and the endpoint's delivery log the owner reads
// (bounded, newest first) and replays from. The consumer (consumer.ts) decides when to send.
import type { WebhookConfig } from '../config.ts'
import { notFound } from '../errors.ts'
import { formatMicros } from '../money/units.ts'
import { pageStream } from '../records/activity.ts'
import type { Keyspace } from '../redis/keys.ts'
import type { Store } from '../redis/store.ts'
import type { StoredEndpoint, WebhookStore } from './endpoints.ts'
import { eventId, streamIdOf } from './event-ids.ts'
import { type DeliveryRecord, type Owner, SKIPPED_DISABLED } from './events.ts'
import { postEvent } from './post.ts'
import { signedHeaders } from './signing.ts'

export const DELIVERY_LOG_LENGTH = 100

/** An event as read from its owner's stream. */
export interface StoredEvent {
  id: string
  type: string
  createdAt: number
  data: Record<string, unknown>
}

/** A stream entry's fields (type, at, data) as the event. */
export function eventOf(owner: Owner, streamId: string, fields: string[]): StoredEvent {
  const map: Record<string, string> = {}
  for (let i = 0; i + 1 < fields.length; i += 2) map[fields[i] as string] = fields[i + 1] as string
  return {
    id: eventId(owner, streamId),
    type: map.type ?? '',
    createdAt: Number(map.at ?? 0),
    data: JSON.parse(map.data ?? '{}') as Record<string, unknown>,
  }
}

/** Whether the endpoint is one the event goes to: subscribed, and for balance.low its own threshold. */
export function wants(endpoint: StoredEndpoint, event: StoredEvent): boolean {
  if (!endpoint.events.includes(event.type)) return false
  if (event.type !== 'balance.low') return true
  return endpoint.threshold !== null && event.data.thresholdUsdc === formatMicros(endpoint.threshold)
}

/**
 * An event's state at one endpoint, by its last record: skipped (dropped while the endpoint was
 * disabled; one written since it was disabled, not yet read, will be), delivered, failing, or
 * unknown (no try logged yet, or no longer in the log). `reason` says why it was skipped.
 */
function deliveryState(endpoint: StoredEndpoint, event: StoredEvent, record: DeliveryRecord | undefined) {
  if (record?.skipped) return { state: 'skipped' as const, reason: record.skipped }
  if (record) return { state: record.ok ? ('delivered' as const) : ('failing' as const), reason: null }
  if (endpoint.disabled && event.createdAt >= endpoint.disabled.at)
    return { state: 'skipped' as const, reason: SKIPPED_DISABLED }
  return { state: 'unknown' as const, reason: null }
}

export class WebhookDeliveries {
  constructor(
    private readonly store: Store,
    private readonly keys: Keyspace,
    private readonly webhooks: WebhookStore,
    private readonly config: WebhookConfig,
  ) {}

  /** POSTs the event, signed with the endpoint's secrets, and logs the attempt. */
  async send(owner: Owner, endpoint: StoredEndpoint, event: StoredEvent, attempt: number, replay = false) {
    const body = JSON.stringify({
      id: event.id,
      type: event.type,
      createdAt: event.createdAt,
      data: event.data,
    })
    const timestamp = Math.floor(Date.now() / 1000)
    const secrets = await this.webhooks.signingSecrets(owner, endpoint)
    const headers = signedHeaders(secrets, event.id, timestamp, body)
    const outcome = await postEvent(endpoint.url, headers, body, this.config, this.config.timeoutMs)
    const record: DeliveryRecord = {
      eventId: event.id,
      type: event.type,
      attempt,
      at: Date.now(),
      replay,
      ...outcome,
    }
    await this.write(owner, endpoint.id, record)
    return record
  }

  /** Logs an event dropped for the endpoint, unsent (it was disabled): shown as skipped. */
  async skip(owner: Owner, endpoint: StoredEndpoint, event: StoredEvent, reason: string): Promise<void> {
    await this.write(owner, endpoint.id, {
      eventId: event.id,
      type: event.type,
      attempt: 0,
      at: Date.now(),
      replay: false,
      ok: false,
      httpStatus: null,
      error: null,
      skipped: reason,
    })
  }

  /** Adds the record to the endpoint's log, which keeps the last DELIVERY_LOG_LENGTH. */
  private async write(owner: Owner, endpointId: string, record: DeliveryRecord): Promise<void> {
    const log = this.keys.webhookLog(owner, endpointId)
    const written = (await this.store
      .multi()
      .lpush(log, JSON.stringify(record))
      .ltrim(log, 0, DELIVERY_LOG_LENGTH - 1)
      .hexists(this.keys.webhooks(owner), endpointId)
      .exec()) as [unknown, unknown][]
    // Removed while this try was in flight: the removal deleted the log before this write.
    if (!written.at(-1)![1]) await this.store.del(log)
  }

  async log(owner: Owner, endpointId: string): Promise<DeliveryRecord[]> {
    const rows = await this.store.lrange(this.keys.webhookLog(owner, endpointId), 0, DELIVERY_LOG_LENGTH - 1)
    return rows.map((row) => JSON.parse(row) as DeliveryRecord)
  }

  /**
   * The owner's events, newest first, a page of the stream (GET /v1/agent/events, /v1/supplier/events):
   * each with, for every endpoint that wants it, its last try where the endpoint's log still has one.
   */
  async events(owner: Owner, limit: number, before: string | null) {
    const endpoints = await this.webhooks.list(owner)
    const logs = await Promise.all(endpoints.map((endpoint) => this.log(owner, endpoint.id)))
    // Each log is newest first: the first record of an event is its last try. By stream id, so a
    // record whose id has no owner's mark is the same event's.
    const last = logs.map((log) => {
      const byEvent = new Map<string, DeliveryRecord>()
      for (const record of log) {
        const streamId = streamIdOf(owner, record.eventId)
        if (streamId !== null && !byEvent.has(streamId)) byEvent.set(streamId, record)
      }
      return byEvent
    })
    return pageStream(this.store, this.keys.webhookEvents(owner), limit, before, ([streamId, fields]) => {
      const event = eventOf(owner, streamId, fields)
      return {
        id: event.id,
        type: event.type,
        at: new Date(event.createdAt).toISOString(),
        data: event.data,
        deliveries: endpoints.flatMap((endpoint, i) => {
          if (!wants(endpoint, event)) return []
          const record = last[i]!.get(streamId)
          return [
            {
              endpointId: endpoint.id,
              ...deliveryState(endpoint, event, record),
              attempt: record && !record.skipped ? record.attempt : null,
              httpStatus: record?.httpStatus ?? null,
              error: record?.error ?? null,
              at: record ? new Date(record.at).toISOString() : null,
            },
          ]
        }),
      }
    })
  }

  /**
   * Sends one event again, now, whatever its earlier outcome, under its id: the receiver dedups by
   * it. Another owner's id, or a malformed one, is no such event.
   */
  async replay(owner: Owner, endpoint: StoredEndpoint, id: string): Promise<DeliveryRecord> {
    const streamId = streamIdOf(owner, id)
    const entries = streamId
      ? ((await this.store.xrange(this.keys.webhookEvents(owner), streamId, streamId)) as [
          string,
          string[],
        ][])
      : []
    const entry = entries[0]
    if (!entry) throw notFound('no such event (or trimmed from the stream)', 'event_not_found')
    const event = eventOf(owner, entry[0], entry[1])
    if (!endpoint.events.includes(event.type))
      throw notFound('this endpoint does not subscribe to that event', 'event_not_found')
    return this.send(owner, endpoint, event, 0, true)
  }
}
