// Every replica runs a webhook consumer: it reads the owners' event streams as one consumer group
// (each new event goes to one replica), sends each event to the owner's endpoints that want it,
// and acknowledges it once every such endpoint has answered 2xx or run out of attempts. An event
// left pending (a retry not yet due, a replica gone) is claimed back with XAUTOCLAIM once idle;
// retries wait backoffMs, then twice that, and so on. Delivery is at least once: receivers dedup by id.
import { hostname } from 'node:os'
import type { Logger } from 'pino'
import type { WebhookConfig } from '../config.ts'
import type { Keyspace } from '../redis/keys.ts'
import type { Store } from '../redis/store.ts'
import type { WebhookDeliveries } from './delivery.ts'
import { eventOf, wants } from './delivery.ts'
import type { WebhookStore } from './endpoints.ts'
import { DELIVERY_GROUP, type Owner } from './events.ts'

const BATCH = 50
type Entry = [string, string[]]

export class WebhookConsumer {
  private readonly name = `${hostname()}-${process.pid}-${Math.random().toString(36).slice(2, 8)}`

  constructor(
    private readonly store: Store,
    private readonly keys: Keyspace,
    private readonly webhooks: WebhookStore,
    private readonly deliveries: WebhookDeliveries,
    private readonly config: WebhookConfig,
  ) {}

  /** One pass: new events, then those pending long enough to be due again. Answers events handled. */
  async pass(): Promise<number> {
    const owners = (await this.store.smembers(this.keys.webhookOwners)) as Owner[]
    let handled = 0
    for (const owner of owners) {
      const stream = this.keys.webhookEvents(owner)
      const fresh = (await this.store.xreadgroup(
        'GROUP',
        DELIVERY_GROUP,
        this.name,
        'COUNT',
        BATCH,
        'STREAMS',
        stream,
        '>',
      )) as [string, Entry[]][] | null
      // A claim must outlast a delivery in flight elsewhere, or two replicas send the same try.
      const minIdle = Math.max(this.config.backoffMs, this.config.timeoutMs * 2)
      const claimed = (await this.store.xautoclaim(
        stream,
        DELIVERY_GROUP,
        this.name,
        minIdle,
        '0-0',
        'COUNT',
        BATCH,
      )) as [string, Entry[]]
      for (const entry of [...(fresh?.[0]?.[1] ?? []), ...claimed[1]]) {
        // A trimmed entry comes back from XAUTOCLAIM without fields: nothing left to send.
        if (entry[1]) await this.handle(owner, stream, entry)
        else await this.store.xack(stream, DELIVERY_GROUP, entry[0])
        handled++
      }
    }
    return handled
  }

  // Sends the event to each endpoint that wants it and is due; acks once none is left waiting.
  private async handle(owner: Owner, stream: string, [streamId, fields]: Entry): Promise<void> {
    const event = eventOf(streamId, fields)
    let waiting = false
    for (const endpoint of await this.webhooks.list(owner)) {
      if (!wants(endpoint, event)) continue
      const tries = this.keys.webhookTries(owner, endpoint.id)
      const [count, last, end] = await this.store.hmget(tries, event.id, `${event.id}:at`, `${event.id}:end`)
      if (end) continue
      const attempts = Number(count ?? 0)
      const dueAt = attempts === 0 ? 0 : Number(last) + this.config.backoffMs * 2 ** (attempts - 1)
      if (Date.now() < dueAt) {
        waiting = true
        continue
      }
      const record = await this.deliveries.send(owner, endpoint, event, attempts + 1)
      const finished = record.ok || attempts + 1 >= this.config.maxAttempts
      await this.store.hset(tries, event.id, attempts + 1, `${event.id}:at`, Date.now())
      if (finished) await this.store.hset(tries, `${event.id}:end`, record.ok ? 'delivered' : 'failed')
      else waiting = true
    }
    if (waiting) return
    await this.store.xack(stream, DELIVERY_GROUP, streamId)
    for (const endpoint of await this.webhooks.list(owner))
      await this.store.hdel(
        this.keys.webhookTries(owner, endpoint.id),
        event.id,
        `${event.id}:at`,
        `${event.id}:end`,
      )
  }
}

/** Runs the consumer every pollMs until stopped; stop waits for the pass in flight (drain). */
export function startWebhookConsumer(consumer: WebhookConsumer, pollMs: number, logger: Logger) {
  let stopped = false
  let running: Promise<unknown> | null = null
  const timer = setInterval(() => {
    if (stopped || running) return
    running = consumer
      .pass()
      .catch((error: Error) => logger.warn({ err: error.message }, 'webhook pass failed'))
      .finally(() => {
        running = null
      })
  }, pollMs)
  timer.unref()
  return async () => {
    stopped = true
    clearInterval(timer)
    await running
  }
}
