// Every replica runs a webhook consumer: it reads the owners' event streams as one consumer group
// (each new event goes to one replica), sends each event to the owner's endpoints that want it,
// and acknowledges it once every such endpoint has answered 2xx or run out of attempts. An event
// left pending (a retry not yet due, a replica gone) is claimed back with XAUTOCLAIM once idle;
// retries wait backoffMs, then twice that, and so on. Delivery is at least once: receivers dedup by id.
//
// A pass reads only the owners flagged due (webhooks:due, which the script that writes an event
// adds its owner to, in the same call): its cost follows the owners with something to send, not
// every owner with an endpoint. The flag is taken before the stream is read, so an event written
// meanwhile flags the owner again; an owner left with a retry waiting is flagged again. Every
// SWEEP_MS a pass reads every owner instead: what a replica that stopped between taking a flag
// and acknowledging left behind is still sent.
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
const SWEEP_MS = 60_000
type Entry = [string, string[]]

export class WebhookConsumer {
  private readonly name = `${hostname()}-${process.pid}-${Math.random().toString(36).slice(2, 8)}`
  private sweptAt = 0

  constructor(
    private readonly store: Store,
    private readonly keys: Keyspace,
    private readonly webhooks: WebhookStore,
    private readonly deliveries: WebhookDeliveries,
    private readonly config: WebhookConfig,
  ) {}

  /**
   * One pass: each owner's new events, then those pending long enough to be due again; the owners
   * flagged due, or every owner on a sweep (the first pass, then every SWEEP_MS). Answers events handled.
   */
  async pass(sweep = Date.now() - this.sweptAt >= SWEEP_MS): Promise<number> {
    if (sweep) this.sweptAt = Date.now()
    const owners = sweep
      ? ((await this.store.smembers(this.keys.webhookOwners)) as Owner[])
      : await this.flaggedOwners()
    let handled = 0
    for (const owner of owners) {
      // Taken before the read: an event written from here on flags the owner again.
      if (!sweep) await this.store.srem(this.keys.webhookDue(owner), owner)
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
      const entries = [...(fresh?.[0]?.[1] ?? []), ...claimed[1]]
      for (const entry of entries) {
        // A trimmed entry comes back from XAUTOCLAIM without fields: nothing left to send.
        if (entry[1]) await this.handle(owner, stream, entry)
        else await this.store.xack(stream, DELIVERY_GROUP, entry[0])
        handled++
      }
      // Still something to do: a full batch read, or an event waiting on a retry (here or at
      // another replica): the next pass looks again.
      if (entries.length >= BATCH || (await this.pendingCount(stream)) > 0)
        await this.store.sadd(this.keys.webhookDue(owner), owner)
    }
    return handled
  }

  /** The owners flagged due: in the prefix's set, or held apart in every set an owner was listed in. */
  private async flaggedOwners(): Promise<Owner[]> {
    const sets =
      this.keys.layout === 'apart'
        ? await this.store.smembers(this.keys.webhookDueSets)
        : [this.keys.webhookDueOfPrefix]
    const owners = await Promise.all(sets.map((set) => this.store.smembers(set)))
    return owners.flat() as Owner[]
  }

  private async pendingCount(stream: string): Promise<number> {
    const summary = (await this.store.xpending(stream, DELIVERY_GROUP)) as [number, ...unknown[]]
    return Number(summary[0])
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
