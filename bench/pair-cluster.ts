// The money pair on a local three-master Cluster, both ways: today's admit + clear under the
// prefix's one hash tag (every key on one master), and the two-phase steps (src/market/two-phase.ts)
// with accounts over their shards and the offers under tags of their own. For each: pairs/s from
// one client process, Redis CPU per pair over all masters, and the busiest master's share.
//   bun bench/pair-cluster.ts [seconds=5] [concurrency=64] [offers=3]   (needs redis-server, redis-cli)
import { randomBytes, randomUUID } from 'node:crypto'
import Redis from 'ioredis'
import { AccountStore } from '../src/accounts/accounts.ts'
import { type Admission, admit } from '../src/market/admission.ts'
import { clear } from '../src/market/clearing.ts'
import { OfferService } from '../src/market/offers.ts'
import { admitApart, clearApart, ownerKeyspaces } from '../src/market/two-phase.ts'
import type { MicroDiem } from '../src/money/units.ts'
import { createRedis, whenReady } from '../src/redis/connection.ts'
import { keyspace } from '../src/redis/keys.ts'
import { startLocalCluster } from '../src/redis/local-cluster.ts'
import { AdmitCode } from '../src/redis/result-codes.ts'
import { admitRequest, meteredClear } from '../test/helpers/market.ts'

const seconds = Number(process.argv[2] ?? 5)
const concurrency = Number(process.argv[3] ?? 64)
const offerCount = Number(process.argv[4] ?? 3)
const ACCOUNTS = 60

const cluster = await startLocalCluster(3)
const redis = createRedis(cluster.url, { name: 'svc-bench-pair-cluster' })
await whenReady(redis, 15_000)

async function cpu(): Promise<number[]> {
  return Promise.all(
    cluster.nodes.map(async (node) => {
      const direct = new Redis(node.port, '127.0.0.1')
      try {
        const info = await direct.info('cpu')
        const field = (name: string) => Number(new RegExp(`${name}:([\\d.]+)`).exec(info)?.[1] ?? 0)
        return field('used_cpu_user') + field('used_cpu_sys')
      } finally {
        direct.disconnect()
      }
    }),
  )
}

async function drive(pair: (i: number) => Promise<void>) {
  const before = await cpu()
  const end = performance.now() + seconds * 1000
  let pairs = 0
  await Promise.all(
    Array.from({ length: concurrency }, async (_, worker) => {
      while (performance.now() < end) {
        await pair(worker + pairs)
        pairs++
      }
    }),
  )
  const spent = (await cpu()).map((after, i) => after - before[i]!)
  const total = spent.reduce((sum, s) => sum + s, 0)
  return {
    pairsPerSecond: Math.round(pairs / seconds),
    redisUsPerPair: Number(((total * 1e6) / pairs).toFixed(1)),
    busiestShare: Number((Math.max(...spent) / total).toFixed(3)),
  }
}

const BIG = 1_000_000_000_000

try {
  // One hash tag: the market as it runs today.
  const keys = keyspace(`bench${randomBytes(3).toString('hex')}:{m}`)
  const offers = new OfferService(redis, keys, randomBytes(32))
  for (let i = 0; i < offerCount; i++)
    await offers.create({
      upstreamBaseUrl: 'http://127.0.0.1:1',
      upstreamApiKey: `bench-${randomUUID()}`,
      askCents: 50,
      capacity: BIG as MicroDiem,
      maxInFlight: 100_000,
    })
  const accounts = new AccountStore(redis, keys)
  const oneTag: string[] = []
  for (let i = 0; i < ACCOUNTS; i++) {
    const created = await accounts.create(`0x${randomBytes(20).toString('hex')}`, 50)
    await accounts.credit(created.account.id, '1000000.000000', 'bench', 'bench')
    oneTag.push(created.account.id)
  }
  const single = await drive(async (i) => {
    const admitted = await admit(redis, keys, {
      ...admitRequest(oneTag[i % ACCOUNTS]!),
      requestId: 'req_bench',
    })
    if (admitted.code !== AdmitCode.Admitted) throw new Error(`admit refused: ${admitted.code}`)
    await clear(redis, keys, meteredClear((admitted as Admission).attemptId, 700))
  })

  // Two-phase: accounts over their shards, offers under their own tags.
  const owners = ownerKeyspaces(`bench${randomBytes(3).toString('hex')}:{m}`)
  const offerIds: string[] = []
  for (let i = 0; i < offerCount; i++) {
    const id = randomUUID()
    await redis.hset(owners.offer(id).offer(id), {
      id,
      status: 'active',
      askCents: 50,
      capacity: BIG,
      burned: 0,
      held: 0,
      earned: 0,
      fees: 0,
      maxInFlight: 100_000,
      inflight: 0,
      cooldownUntil: 0,
      upstreamBaseUrl: 'http://127.0.0.1:1',
      upstreamKeyEnc: 'sealed',
    })
    offerIds.push(id)
  }
  const apart: string[] = []
  for (let i = 0; i < ACCOUNTS; i++) {
    const id = `acct_${randomBytes(12).toString('hex')}`
    await redis.hset(owners.account(id).account(id), {
      id,
      maxPriceCents: 50,
      confirmed: BIG,
      pending: 0,
      held: 0,
      spent: 0,
      funded: BIG,
      writtenOff: 0,
    })
    apart.push(id)
  }
  const twoPhase = await drive(async (i) => {
    const accountId = apart[i % ACCOUNTS]!
    const offerId = offerIds[i % offerCount]!
    const admitted = await admitApart(redis, owners, {
      ...admitRequest(accountId),
      offerId,
      maxCents: 50,
    })
    if (admitted.code !== AdmitCode.Admitted) throw new Error(`admit refused: ${admitted.code}`)
    await clearApart(
      redis,
      owners,
      { accountId, offerId, model: 'llama-3.3-70b' },
      meteredClear(admitted.attemptId, 700),
    )
  })
  console.log(JSON.stringify({ seconds, concurrency, offers: offerCount, oneTag: single, twoPhase }, null, 1))
} finally {
  redis.disconnect()
  cluster.stop()
}
