// What the replicas' views of a ladder held apart read: N replicas (each its own store and market
// steps, in this process) on a local three-master Cluster with `offers` offers, stamped as seen as
// their reaper passes stamp them, send requests (admit, then release) at `rate` a second in all
// for `seconds`. It counts the views' reads of offer rows (HMGET of an offer's hash) and every
// command the masters ran, per request: the market's load stays the same, only the replicas vary.
//   bun bench/view-reads.ts [replicas=1,4] [offers=6] [seconds=5] [rate=200]
import { randomBytes } from 'node:crypto'
import Redis from 'ioredis'
import { AccountStore } from '../src/accounts/accounts.ts'
import { digestApiKey } from '../src/accounts/api-keys.ts'
import { OfferService } from '../src/market/offers.ts'
import { marketSteps } from '../src/market/steps.ts'
import type { MicroDiem } from '../src/money/units.ts'
import { attemptIdOf } from '../src/records/attempt-id.ts'
import { newSupportReference } from '../src/records/support-reference.ts'
import { keyspace } from '../src/redis/keys.ts'
import { claimLayout } from '../src/redis/layout.ts'
import { startLocalCluster } from '../src/redis/local-cluster.ts'
import { AdmitCode } from '../src/redis/result-codes.ts'
import { createStore, type Store } from '../src/redis/store.ts'
import { admitRequest } from '../test/helpers/market.ts'

const [replicaList = '1,4', offerCount = '6', secondsArg = '5', rateArg = '200'] = process.argv.slice(2)
const seconds = Number(secondsArg)
const rate = Number(rateArg)

/** Every command the masters ran so far (INFO commandstats, summed), and the HMGETs among them. */
async function commands(ports: number[]): Promise<{ all: number; hmget: number }> {
  const total = { all: 0, hmget: 0 }
  for (const port of ports) {
    const master = new Redis(port, '127.0.0.1')
    const info = await master.info('commandstats')
    master.disconnect()
    for (const match of info.matchAll(/cmdstat_(\w+):calls=(\d+)/g)) {
      total.all += Number(match[2])
      if (match[1] === 'hmget') total.hmget += Number(match[2])
    }
  }
  return total
}

const cluster = await startLocalCluster()
try {
  for (const replicas of replicaList.split(',').map(Number)) {
    const prefix = `bench:{v${randomBytes(4).toString('hex')}}`
    const setup = createStore(cluster.url, { name: 'bench-view-reads' })
    await setup.whenReady(15_000)
    await claimLayout(setup, prefix, 'apart')
    const keys = keyspace(prefix, 'apart')
    const offers = new OfferService(setup, keys, randomBytes(32))
    for (let i = 0; i < Number(offerCount); i++) {
      await offers.create({
        upstreamBaseUrl: 'http://127.0.0.1:9',
        upstreamApiKey: `bench-${randomBytes(8).toString('hex')}`,
        askCents: 50,
        capacity: 1_000_000_000_000 as MicroDiem,
        maxInFlight: 100_000,
      })
    }
    const accounts = new AccountStore(setup, keys)
    const stamp = () =>
      setup.zadd(
        keys.replicas,
        ...Array.from({ length: replicas }, (_, i) => [Date.now(), `bench-${i}`]).flat(),
      )
    await stamp()
    let rows = 0
    let served = 0
    const gateways = await Promise.all(
      Array.from({ length: replicas }, async (_, i) => {
        const store = createStore(cluster.url, { name: `bench-view-reads-${i}` })
        await store.whenReady(15_000)
        const counted: Store = {
          ...store,
          hmget: ((key: string, ...fields: string[]) => {
            if (key.includes(':offer:')) rows++
            return store.hmget(key, ...fields)
          }) as Store['hmget'],
        }
        const created = await accounts.create(`0x${randomBytes(20).toString('hex')}`, 50)
        await accounts.credit(created.account.id, '100000.000000', 'bench', 'bench')
        return {
          store,
          steps: marketSteps(counted, keys),
          accountId: created.account.id,
          digest: digestApiKey(created.apiKey),
        }
      }),
    )
    // One request from each replica in turn, so that the market's rate is the same for any count.
    const request = async (gateway: (typeof gateways)[number]) => {
      const attemptId = attemptIdOf(newSupportReference(), 1)
      const admitted = await gateway.steps.admit(
        admitRequest(gateway.accountId, {
          attemptId,
          apiKeyId: '',
          apiKeyDigest: gateway.digest,
          requestId: 'bench',
        }),
      )
      if (admitted.code !== AdmitCode.Admitted) throw new Error(`refused: ${JSON.stringify(admitted)}`)
      const offerId = (admitted as { offerId: string }).offerId
      const who = { attemptId, accountId: gateway.accountId, offerId, model: 'llama-3.3-70b' }
      await gateway.steps.release(who, { errorCode: 'bench', cooldownMs: 0, upstreamBalance: null })
      served++
    }
    // Warm: each view read once, each key resolved.
    await Promise.all(gateways.map(request))
    const ports = cluster.nodes.map((node) => node.port)
    const before = await commands(ports)
    ;[rows, served] = [0, 0]
    const start = performance.now()
    const end = start + seconds * 1_000
    let next = start
    let stamped = start
    let turn = 0
    const inFlight: Promise<void>[] = []
    while (performance.now() < end) {
      // As each replica's reaper pass stamps it (every second by default).
      if (performance.now() - stamped >= 1_000) {
        stamped = performance.now()
        await stamp()
      }
      inFlight.push(request(gateways[turn++ % replicas]!))
      next += 1_000 / rate
      const wait = next - performance.now()
      if (wait > 0) await Bun.sleep(wait)
    }
    await Promise.all(inFlight)
    const after = await commands(ports)
    console.log(
      `replicas ${replicas}, offers ${offerCount}: ${served} requests in ${seconds} s; ` +
        `offer rows read by the views ${rows} (${(rows / seconds).toFixed(1)}/s, ` +
        `${(rows / served).toFixed(4)} per request); per request, Redis ran ` +
        `${((after.all - before.all) / served).toFixed(2)} commands, ${((after.hmget - before.hmget) / served).toFixed(3)} HMGET`,
    )
    for (const gateway of gateways) {
      await gateway.steps.close()
      gateway.store.close()
    }
    setup.close()
  }
} finally {
  cluster.stop()
}
