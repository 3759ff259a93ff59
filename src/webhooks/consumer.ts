// Every replica runs a webhook consumer: it reads the owners' event streams as one consumer group
// (each new event goes to one replica), sends each event to the owner's endpoints that want it,
// and acknowledges it once every such endpoint has answered 2xx or run out of attempts. An event
// left pending (a retry not yet due, a replica gone) is claimed back with XAUTOCLAIM once idle;
// retries wait backoffMs, then twice that, and so on. Delivery is at least once: receivers dedup by id.
// A 410 Gone ends the event's tries at that endpoint as failed and disables the endpoint: no event
// is sent to it (nor waits for it) until its owner enables it again; each one dropped for it is
// logged there as skipped.
//
// A pass reads only the owners flagged due (webhooks:due, which the script that writes an event
// adds its owner to, in the same call): its cost follows the owners with something to send, not
// every owner with an endpoint. The flag is taken before the stream is read, so an event written
// meanwhile flags the owner again; an owner left with a retry waiting is flagged again. Every
// SWEEP_MS a pass reads every owner instead: what a replica that stopped between taking a flag
// and acknowledging left behind is still sent. A sweep also drops, from each owner's group, the
// consumers stopped replicas left there (lua/webhook-forget.lua: idle past forgetAfterMs and
// nothing pending, checked in the same call): consumers follow the replicas running, not every
// replica ever started, and an entry pending on a stopped one keeps it until it is claimed.
//
// An owner's drain runs for at most one try's time (timeoutMs): past that it yields its slot after
// the event in hand and is flagged again. An owner whose last drain yielded is slow: a pass visits
// it after the others, and slow owners hold at most half the slots, so a receiver that never
// answers delays another owner's delivery by about one try, not by its whole backlog.
import { hostname } from 'node:os'
import type { Logger } from 'pino'
import type { WebhookConfig } from '../config.ts'
import { ApiError } from '../errors.ts'
import type { Keyspace } from '../redis/keys.ts'
import { runScript } from '../redis/scripts.ts'
import type { Store } from '../redis/store.ts'
import type { StoredEvent, WebhookDeliveries } from './delivery.ts'
import { eventOf, wants } from './delivery.ts'
import { DISABLED_GONE, type StoredEndpoint, type WebhookStore } from './endpoints.ts'
import { triesField } from './event-ids.ts'
import { DELIVERY_GROUP, type Owner, SKIPPED_DISABLED } from './events.ts'

const BATCH = 50
// Stale entries claimed with one XAUTOCLAIM: a backlog a stopped replica left costs a claim per
// this many, while a drain that yields early hands back only a few it claimed and did not start.
export const CLAIM_BATCH = 10
const SWEEP_MS = 60_000
// Owners a replica delivers for at once: a slow or hanging receiver holds one of these, not the
// replica's whole pass (one owner's backlog never delays another's), and no outside party can make
// a replica open a connection per owner flagged.
const OWNERS_AT_ONCE = 32
type Entry = [string, string[]]

export class WebhookConsumer {
  private readonly name = `${hostname()}-${process.pid}-${Math.random().toString(36).slice(2, 8)}`
  private sweptAt = 0
  /** The owners this replica is delivering for now: a pass started meanwhile leaves them be. */
  private readonly busy = new Set<Owner>()
  /** The owners whose last drain here used up its time and yielded. */
  private readonly slow = new Set<Owner>()
  /** Slots held by slow owners now, at most slowSlots. */
  private slowBusy = 0
  private readonly slowSlots: number

  constructor(
    private readonly store: Store,
    private readonly keys: Keyspace,
    private readonly webhooks: WebhookStore,
    private readonly deliveries: WebhookDeliveries,
    private readonly config: WebhookConfig,
    /** Owners delivered for at once (OWNERS_AT_ONCE; fewer in a test). */
    readonly ownersAtOnce = OWNERS_AT_ONCE,
    /**
     * How long a consumer with nothing pending sits idle before a sweep drops it: two sweeps (less
     * in a test). A live replica's consumer dropped loses nothing (none pending) and its next read
     * makes it again; the wait only spares that churn.
     */
    readonly forgetAfterMs = 2 * SWEEP_MS,
  ) {
    this.slowSlots = Math.max(1, Math.floor(ownersAtOnce / 2))
  }

  /**
   * One pass: each owner's new events, then those pending long enough to be due again; the owners
   * flagged due, or every owner on a sweep (the first pass, then every SWEEP_MS), up to
   * OWNERS_AT_ONCE at a time, skipping those a pass still in flight delivers for and the slow
   * ones past their share of slots (an owner left out stays flagged); the slow ones last. Answers
   * events handled.
   */
  async pass(sweep = Date.now() - this.sweptAt >= SWEEP_MS): Promise<number> {
    if (sweep) this.sweptAt = Date.now()
    const listed = new Set(
      sweep ? ((await this.store.smembers(this.keys.webhookOwners)) as Owner[]) : await this.flaggedOwners(),
    )
    const owners = [...listed].sort((a, b) => Number(this.slow.has(a)) - Number(this.slow.has(b)))
    let handled = 0
    let next = 0
    let failed: unknown = null
    const skipped: Owner[] = []
    const worker = async () => {
      while (next < owners.length && this.busy.size < this.ownersAtOnce) {
        const owner = owners[next++] as Owner
        const slow = this.slow.has(owner)
        if (this.busy.has(owner) || (slow && this.slowBusy >= this.slowSlots)) {
          skipped.push(owner)
          continue
        }
        this.busy.add(owner)
        if (slow) this.slowBusy++
        try {
          handled += await this.drain(owner, sweep)
        } catch (error) {
          // One owner's failure (a blip) ends neither the others' deliveries nor its own flag,
          // which its drain took: the next pass tries it again.
          failed ??= error
          await this.flag(owner).catch(() => {})
        } finally {
          this.busy.delete(owner)
          if (slow) this.slowBusy--
        }
      }
    }
    await Promise.all(Array.from({ length: Math.min(this.ownersAtOnce, owners.length) }, worker))
    // A sweep's owners are not flagged: those it could not visit (busy, or no slot left) are, so
    // an ordinary pass reads them before the next sweep.
    if (sweep) for (const owner of [...skipped, ...owners.slice(next)]) await this.flag(owner)
    if (failed) throw failed
    return handled
  }

  private flag(owner: Owner): Promise<unknown> {
    return this.store.sadd(this.keys.webhookDue(owner), owner)
  }

  /**
   * One owner's events: new ones read one at a time and sent at once, so none waits in a batch of
   * ours while its idle time runs out and another replica claims and sends it too; stale ones
   * claimed CLAIM_BATCH at a time, each started only while a whole try still ends before its claim
   * could be taken elsewhere, those not started handed back claimable at once. Ends after BATCH
   * entries, or once it has run one try's time (the owner is then slow).
   */
  private async drain(owner: Owner, sweep: boolean): Promise<number> {
    const started = Date.now()
    // Taken before the read: an event written from here on flags the owner again.
    if (!sweep) await this.store.srem(this.keys.webhookDue(owner), owner)
    const stream = this.keys.webhookEvents(owner)
    // A claim must outlast a delivery in flight elsewhere, or two replicas send the same try.
    const minIdle = Math.max(this.config.backoffMs, this.config.timeoutMs * 2)
    let handled = 0
    let cursor: string | null = '0-0'
    let fresh = true
    let yielded = false
    let claimed: Entry[] = []
    let claimedAt = 0
    while (handled < BATCH && !yielded) {
      if (claimed.length > 0 && Date.now() - claimedAt > minIdle - this.config.timeoutMs) break
      let entry = claimed.shift()
      // New entries first, until none is left; then those pending, claimed once idle long enough.
      if (!entry && fresh) {
        const read = (await this.store.xreadgroup(
          'GROUP',
          DELIVERY_GROUP,
          this.name,
          'COUNT',
          1,
          'STREAMS',
          stream,
          '>',
        )) as [string, Entry[]][] | null
        entry = read?.[0]?.[1]?.[0]
        fresh = entry !== undefined
      }
      if (!entry) {
        if (cursor === null) break
        claimedAt = Date.now()
        const [next, entries] = (await this.store.xautoclaim(
          stream,
          DELIVERY_GROUP,
          this.name,
          minIdle,
          cursor,
          'COUNT',
          Math.min(CLAIM_BATCH, BATCH - handled),
        )) as [string, Entry[]]
        cursor = next === '0-0' ? null : next
        claimed = entries
        continue
      }
      // A trimmed entry comes back from XAUTOCLAIM without fields: nothing left to send.
      if (entry[1]) await this.handle(owner, stream, entry)
      else await this.store.xack(stream, DELIVERY_GROUP, entry[0])
      handled++
      yielded = Date.now() - started >= this.config.timeoutMs
    }
    // Claimed and not started: idle again at once, for the next pass here or another replica.
    if (claimed.length > 0)
      await this.store.xclaim(
        stream,
        DELIVERY_GROUP,
        this.name,
        0,
        ...claimed.map(([id]) => id),
        'IDLE',
        minIdle,
        'JUSTID',
      )
    if (yielded) this.slow.add(owner)
    else this.slow.delete(owner)
    // Still something to do: a full batch handled, the drain out of time, or an event waiting on a
    // retry (here or at another replica): the next pass looks again.
    if (handled >= BATCH || yielded || (await this.pendingCount(stream)) > 0) await this.flag(owner)
    if (sweep)
      await runScript(this.store, 'webhookForget', [stream], {
        group: DELIVERY_GROUP,
        idleMs: this.forgetAfterMs,
        keep: this.name,
      })
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

  /** One endpoint's try of the event, when one is due: answers whether a retry is left waiting. */
  private async deliver(
    owner: Owner,
    endpoint: StoredEndpoint,
    event: StoredEvent,
    field: string,
  ): Promise<boolean> {
    const tries = this.keys.webhookTries(owner, endpoint.id)
    const [count, last, end] = await this.store.hmget(tries, field, `${field}:at`, `${field}:end`)
    if (end) return false
    const attempts = Number(count ?? 0)
    const dueAt = attempts === 0 ? 0 : Number(last) + this.config.backoffMs * 2 ** (attempts - 1)
    if (Date.now() < dueAt) return true
    const record = await this.deliveries.send(owner, endpoint, event, attempts + 1)
    const gone = record.httpStatus === 410
    // An endpoint removed meanwhile (a 404 here) has nothing left to disable.
    if (gone)
      await this.webhooks.setDisabled(owner, endpoint.id, DISABLED_GONE).catch((error: unknown) => {
        if (!(error instanceof ApiError)) throw error
      })
    const finished = record.ok || gone || attempts + 1 >= this.config.maxAttempts
    const write = this.store.multi().hset(tries, field, attempts + 1, `${field}:at`, Date.now())
    if (finished) write.hset(tries, `${field}:end`, record.ok ? 'delivered' : 'failed')
    const written = (await write.hexists(this.keys.webhooks(owner), endpoint.id).exec()) as [
      unknown,
      unknown,
    ][]
    // Removed while this try was in flight: the removal deleted the tries before this write.
    if (!written.at(-1)![1]) {
      await this.store.del(tries)
      return false
    }
    return !finished
  }

  // Sends the event to each enabled endpoint that wants it and is due, all at once (one hanging
  // endpoint must not hold the event past a claim's wait); acks once none is left waiting. Each
  // disabled endpoint that wants it and has not ended it logs it skipped, before the ack (a stop
  // between logs it again rather than never).
  private async handle(owner: Owner, stream: string, [streamId, fields]: Entry): Promise<void> {
    const event = eventOf(owner, streamId, fields)
    const field = triesField(streamId)
    const wanting = (await this.webhooks.list(owner)).filter((endpoint) => wants(endpoint, event))
    const endpoints = wanting.filter((endpoint) => !endpoint.disabled)
    const waits = await Promise.all(endpoints.map((endpoint) => this.deliver(owner, endpoint, event, field)))
    const waiting = waits.includes(true)
    if (waiting) return
    for (const endpoint of wanting.filter((endpoint) => endpoint.disabled)) {
      const ended = await this.store.hget(this.keys.webhookTries(owner, endpoint.id), `${field}:end`)
      if (!ended) await this.deliveries.skip(owner, endpoint, event, SKIPPED_DISABLED)
    }
    await this.store.xack(stream, DELIVERY_GROUP, streamId)
    for (const endpoint of await this.webhooks.list(owner))
      await this.store.hdel(this.keys.webhookTries(owner, endpoint.id), field, `${field}:at`, `${field}:end`)
  }
}

/**
 * Runs a pass every pollMs until stopped, not waiting for the one before (a pass stuck on a slow
 * owner would hold up every other): passes in flight overlap, each leaving the owners another
 * delivers for, at most ownersAtOnce of them. Stop waits for those in flight (drain).
 */
export function startWebhookConsumer(consumer: WebhookConsumer, pollMs: number, logger: Logger) {
  let stopped = false
  const running = new Set<Promise<unknown>>()
  const timer = setInterval(() => {
    if (stopped || running.size >= consumer.ownersAtOnce) return
    const pass: Promise<unknown> = consumer
      .pass()
      .catch((error: Error) => logger.warn({ err: error.message }, 'webhook pass failed'))
      .finally(() => running.delete(pass))
    running.add(pass)
  }, pollMs)
  timer.unref()
  return async () => {
    stopped = true
    clearInterval(timer)
    await Promise.all(running)
  }
}
