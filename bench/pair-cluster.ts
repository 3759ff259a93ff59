// The money pair on a local three-master Cluster, both ways: today's admit + clear under the
// prefix's one hash tag (every key on one master), and the two-phase steps (src/market/two-phase.ts)
// with accounts over their shards and the offers under tags of their own. For each: pairs/s from
// `workers` client processes, Redis CPU per pair over all masters, the busiest master's share, and
// the client processes' own CPU per pair.
//   [SCRIPT_FORM=scripts] bun bench/pair-cluster.ts [seconds=5] [concurrency=64] [offers=3] [workers=1]
// (needs redis-server and redis-cli; a worker is this script run again with `worker <json>`)
import { randomBytes, randomUUID } from 'node:crypto'
import { AccountStore } from '../src/accounts/accounts.ts'
import { type Admission, admit } from '../src/market/admission.ts'
import { clear } from '../src/market/clearing.ts'
import { OfferService } from '../src/market/offers.ts'
import { admitApart, clearApart, ownerKeyspaces } from '../src/market/two-phase.ts'
import type { MicroDiem } from '../src/money/units.ts'
import { keyspace } from '../src/redis/keys.ts'
import { startLocalCluster } from '../src/redis/local-cluster.ts'
import { AdmitCode } from '../src/redis/result-codes.ts'
import { serverCpu } from '../src/redis/server-cpu.ts'
import { createStore, type ScriptForm } from '../src/redis/store.ts'
import { admitRequest, meteredClear } from '../test/helpers/market.ts'

interface Work {
  url: string
  mode: 'oneTag' | 'twoPhase'
  prefix: string
  accounts: string[]
  offers: string[]
  seconds: number
  concurrency: number
  /** 'scripts': through ioredis alone, without the native lane to each master (SCRIPT_FORM=scripts). */
  scriptForm: ScriptForm
}

const BIG = 1_000_000_000_000

/** One client process: pairs for `seconds`, `concurrency` at a time; prints how many. */
async function worker(work: Work): Promise<void> {
  const store = createStore(work.url, { name: 'svc-bench-pair-worker', scriptForm: work.scriptForm })
  await store.whenReady(15_000)
  const keys = keyspace(work.prefix)
  const owners = ownerKeyspaces(work.prefix)
  const end = performance.now() + work.seconds * 1000
  let pairs = 0
  const cpuBefore = process.cpuUsage()
  await Promise.all(
    Array.from({ length: work.concurrency }, async (_, slot) => {
      for (let i = slot; performance.now() < end; i += work.concurrency) {
        const accountId = work.accounts[i % work.accounts.length]!
        if (work.mode === 'oneTag') {
          const admitted = await admit(store, keys, { ...admitRequest(accountId), requestId: 'req_bench' })
          if (admitted.code !== AdmitCode.Admitted) throw new Error(`admit refused: ${admitted.code}`)
          await clear(store, keys, meteredClear((admitted as Admission).attemptId, 700))
        } else {
          const offerId = work.offers[i % work.offers.length]!
          const admitted = await admitApart(store, owners, {
            ...admitRequest(accountId),
            offerId,
            maxCents: 50,
          })
          if (admitted.code !== AdmitCode.Admitted) throw new Error(`admit refused: ${admitted.code}`)
          const who = { accountId, offerId, model: 'llama-3.3-70b' }
          await clearApart(store, owners, who, meteredClear(admitted.attemptId, 700))
        }
        pairs++
      }
    }),
  )
  const used = process.cpuUsage(cpuBefore)
  store.close()
  console.log(JSON.stringify({ pairs, cpuUs: used.user + used.system }))
}

if (process.argv[2] === 'worker') {
  await worker(JSON.parse(process.argv[3]!) as Work)
  process.exit(0)
}

const seconds = Number(process.argv[2] ?? 5)
const concurrency = Number(process.argv[3] ?? 64)
const offerCount = Number(process.argv[4] ?? 3)
const workers = Number(process.argv[5] ?? 1)
const ACCOUNTS = 60

const cluster = await startLocalCluster(3)
const store = createStore(cluster.url, { name: 'svc-bench-pair-cluster' })
await store.whenReady(15_000)

const cpu = async () => (await serverCpu(cluster.nodes.map((node) => node.port))).map((c) => c.all)

const scriptForm: ScriptForm = process.env.SCRIPT_FORM === 'scripts' ? 'scripts' : 'functions'

async function drive(work: Omit<Work, 'url' | 'seconds' | 'concurrency' | 'scriptForm'>) {
  const full: Work = { ...work, url: cluster.url, seconds, concurrency, scriptForm }
  const before = await cpu()
  const procs = Array.from({ length: workers }, () =>
    Bun.spawn([process.execPath, import.meta.path, 'worker', JSON.stringify(full)], {
      stdout: 'pipe',
      stderr: 'inherit',
    }),
  )
  const counts = await Promise.all(
    procs.map(
      async (p) => JSON.parse(await new Response(p.stdout).text()) as { pairs: number; cpuUs: number },
    ),
  )
  const pairs = counts.reduce((sum, c) => sum + c.pairs, 0)
  const clientCpuUs = counts.reduce((sum, c) => sum + c.cpuUs, 0)
  const spent = (await cpu()).map((after, i) => after - before[i]!)
  const total = spent.reduce((sum, s) => sum + s, 0)
  return {
    pairsPerSecond: Math.round(pairs / seconds),
    redisUsPerPair: Number(((total * 1e6) / pairs).toFixed(1)),
    busiestShare: Number((Math.max(...spent) / total).toFixed(3)),
    clientUsPerPair: Number((clientCpuUs / pairs).toFixed(1)),
  }
}

try {
  // One hash tag: the market as it runs today.
  const onePrefix = `bench${randomBytes(3).toString('hex')}:{m}`
  const keys = keyspace(onePrefix)
  const offers = new OfferService(store, keys, randomBytes(32))
  for (let i = 0; i < offerCount; i++)
    await offers.create({
      upstreamBaseUrl: 'http://127.0.0.1:1',
      upstreamApiKey: `bench-${randomUUID()}`,
      askCents: 50,
      capacity: BIG as MicroDiem,
      maxInFlight: 1_000_000,
    })
  const accounts = new AccountStore(store, keys)
  const oneTag: string[] = []
  for (let i = 0; i < ACCOUNTS; i++) {
    const created = await accounts.create(`0x${randomBytes(20).toString('hex')}`, 50)
    await accounts.credit(created.account.id, '1000000.000000', 'bench', 'bench')
    oneTag.push(created.account.id)
  }
  const single = await drive({ mode: 'oneTag', prefix: onePrefix, accounts: oneTag, offers: [] })

  // Two-phase: accounts over their shards, offers under their own tags.
  const apartPrefix = `bench${randomBytes(3).toString('hex')}:{m}`
  const owners = ownerKeyspaces(apartPrefix)
  const offerIds: string[] = []
  for (let i = 0; i < offerCount; i++) {
    const id = randomUUID()
    await store.hset(owners.offer(id).offer(id), {
      id,
      status: 'active',
      askCents: 50,
      capacity: BIG,
      burned: 0,
      held: 0,
      earned: 0,
      fees: 0,
      maxInFlight: 1_000_000,
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
    await store.hset(owners.account(id).account(id), {
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
  const twoPhase = await drive({ mode: 'twoPhase', prefix: apartPrefix, accounts: apart, offers: offerIds })
  console.log(
    JSON.stringify({ seconds, concurrency, offers: offerCount, workers, scriptForm, oneTag: single, twoPhase }, null, 1),
  )
} finally {
  store.close()
  cluster.stop()
}
