// (i) Payouts while replicas die: three replicas share one payout wallet on a real local chain
// (anvil, the test USDC). A supplier earns from buyer traffic, then asks for payouts spread over
// the replicas, retrying each on another replica with the same Idempotency-Key when one dies, while
// replicas are killed -9 and restarted. Then blocks stop, three more payouts are asked and the
// supplier is suspended once the first is signed: it is finished, the others are withheld. In the
// end every payout is confirmed or failed, the chain holds exactly one transfer per confirmed
// payout and none for a failed one, the supplier's USDC on chain is what was confirmed, and
// `svc-gateway audit --chain` finds nothing off. The replicas run once on the chain itself and
// once through a lagging RPC (test/helpers/lagging-rpc.ts: receipts and the wallet's nonces read
// from a node behind, answers dropped and reordered): a payout whose receipt a read misses must
// still never be failed and paid again.
import { afterAll, expect, test } from 'bun:test'
import { randomBytes } from 'node:crypto'
import { type Address, getAddress } from 'viem'
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts'
import { createSiweMessage } from 'viem/siwe'
import { formatMicros, parseMicros } from '../src/money/units.ts'
import { keyspace } from '../src/redis/keys.ts'
import { createStore } from '../src/redis/store.ts'
import { startSim } from '../src/sim/server.ts'
import { startChain, type TestChain } from '../test/helpers/chain.ts'
import { runCli } from '../test/helpers/cli.ts'
import { type Misbehaviour, startLaggingRpc } from '../test/helpers/lagging-rpc.ts'
import { payoutEnv, payoutWalletOn, transfersFrom } from '../test/helpers/payouts.ts'
import { testRedisUrl } from '../test/helpers/stack.ts'
import { until } from '../test/helpers/wait.ts'
import { type Cluster, call, chat, fundedBuyer, settled, startCluster } from './cluster.ts'

const PUBLIC_URL = 'http://payouts.chaos.test'
const sim = startSim({ port: 0, outputTokens: 300 })
const store = createStore(testRedisUrl(), { name: 'chaos-i' })
afterAll(async () => {
  await sim.stop()
  store.close()
})

/** A supplier signed in with Ethereum through replica 0: its id, wallet and key. */
async function supplierOn(c: Cluster) {
  const account = privateKeyToAccount(generatePrivateKey())
  const url = c.replicas[0]!.url
  const { nonce } = (await (await fetch(`${url}/v1/supplier/nonce`)).json()) as { nonce: string }
  const message = createSiweMessage({
    domain: new URL(PUBLIC_URL).host,
    uri: `${PUBLIC_URL}/supplier`,
    address: account.address,
    chainId: 84532,
    nonce,
    version: '1',
    issuedAt: new Date(),
  })
  const signature = await account.signMessage({ message })
  const response = await call(url, '/v1/supplier/signin', '', { message, signature })
  if (response.status !== 200) throw new Error(`signin: ${response.status} ${await response.text()}`)
  return (await response.json()) as { supplierId: string; wallet: Address; apiKey: string }
}

/** Asks for a payout on replica `first`, then on the next ones with the same key while replicas die. */
async function askPayout(c: Cluster, first: number, apiKey: string, amountUsdc: string, key: string) {
  for (let i = 0; i < 60; i++) {
    const replica = c.replicas[(first + i) % c.replicas.length]!
    const response = await fetch(`${replica.url}/v1/supplier/payouts`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${apiKey}`,
        'content-type': 'application/json',
        'idempotency-key': key,
      },
      body: JSON.stringify({ amountUsdc }),
      signal: AbortSignal.timeout(5_000),
    }).catch(() => null)
    if (response && (response.status === 200 || response.status === 201)) {
      return ((await response.json()) as { id: string }).id
    }
    if (response && response.status < 500)
      throw new Error(`payout: ${response.status} ${await response.text()}`)
    await Bun.sleep(100)
  }
  throw new Error(`payout ${key} never answered`)
}

test('payouts while replicas are killed -9: each confirmed or failed, on chain once each, audit clean', async () => {
  await payoutsUnderKills({})
})

test('payouts while replicas are killed -9 behind a lagging RPC: each confirmed or failed, on chain once each, audit clean', async () => {
  await payoutsUnderKills({
    receipts: { blocks: 3, share: 0.5 },
    nonces: { blocks: 3, share: 0.5 },
    drop: 0.05,
    reorderMs: 20,
  })
})

async function payoutsUnderKills(misbehaviour: Misbehaviour) {
  let chain: TestChain | undefined
  const started: { cluster?: Cluster } = {}
  let rpc: ReturnType<typeof startLaggingRpc> | undefined
  try {
    chain = await startChain()
    rpc = startLaggingRpc(chain.rpcUrl, 7)
    rpc.set(misbehaviour)
    await scenario(chain, rpc.url, started)
    // the replicas did read from the node behind: the run tested what it says it did
    if (misbehaviour.receipts) expect(rpc.lagged.eth_getTransactionReceipt).toBeGreaterThan(0)
    if (misbehaviour.nonces) expect(rpc.lagged.eth_getTransactionCount).toBeGreaterThan(0)
  } finally {
    await started.cluster?.stop()
    rpc?.stop()
    await chain?.stop()
  }
  console.log(`payouts chaos: reads answered from behind ${JSON.stringify(rpc?.lagged)}`)
}

async function scenario(chain: TestChain, rpcUrl: string, run: { cluster?: Cluster }) {
  const started = Date.now()
  const wallet = await payoutWalletOn(chain)
  const cluster = await startCluster({
    redisUrl: testRedisUrl(),
    sim,
    replicas: 3,
    env: {
      ...payoutEnv(chain, wallet.key),
      // the replicas read and send through it; the test and the audit read the chain itself
      SVC_CHAIN_RPC_URL: rpcUrl,
      SVC_PUBLIC_URL: PUBLIC_URL,
      SVC_PAYOUT_MIN_USDC: '0.000001',
      // a dead holder's lock passes on within a second
      SVC_PAYOUT_LOCK_MS: '1000',
    },
  })
  run.cluster = cluster
  const keys = keyspace(cluster.prefix)
  const supplier = await supplierOn(cluster)
  const posted = await call(cluster.replicas[0]!.url, '/v1/supplier/offers', supplier.apiKey, {
    upstreamApiKey: `chaos-${randomBytes(8).toString('hex')}`,
    askCents: 50,
    capacityDiem: '500',
  })
  expect(posted.status).toBe(201)
  const buyer = await fundedBuyer(cluster, '50')
  const traffic = await Promise.all(
    Array.from({ length: 30 }, (_, i) => chat(cluster.replicas[i % 3]!, buyer.apiKey, false)),
  )
  expect(traffic.every((o) => o.status === 200)).toBe(true)
  await settled(store, cluster.prefix, 10_000)
  const me = (await (
    await call(cluster.replicas[1]!.url, '/v1/supplier/me', supplier.apiKey, undefined, 'GET')
  ).json()) as {
    earnedUsdc: string
  }
  const earned = parseMicros(me.earnedUsdc)!
  const PAYOUTS = 12
  const LATE = 3
  const each = Math.floor(earned / (PAYOUTS + LATE + 1))
  expect(each).toBeGreaterThan(0)
  const amount = formatMicros(each)

  // Blocks keep coming (anvil mines only on a transaction otherwise), so confirmations do.
  let mining = true
  const miner = (async () => {
    while (mining) {
      await chain.testClient.mine({ blocks: 1 }).catch(() => {})
      await Bun.sleep(150)
    }
  })()
  const asks = Array.from({ length: PAYOUTS }, (_, i) =>
    askPayout(cluster, i % 3, supplier.apiKey, amount, `chaos-payout-${i}`),
  )
  const kills: number[] = []
  // The first kill lands while the first payouts are being signed and sent.
  for (let k = 0; k < 4; k++) {
    await Bun.sleep(k === 0 ? 30 : 250)
    const victim = k % 3
    kills.push(victim)
    cluster.replicas[victim]!.child.kill('SIGKILL')
    await cluster.replicas[victim]!.child.exited
    await cluster.start(victim)
  }
  const asked = await Promise.all(asks)
  expect(new Set(asked).size).toBe(PAYOUTS)
  await allClosed(store, keys.payoutsOpen)
  mining = false
  await miner

  // Then blocks stop and more payouts are asked: the first is signed and waits unmined, so the
  // others wait unsigned, and the operator suspends the supplier. The signed one is finished once
  // blocks come again; the unsigned ones are withheld (failed, payable again), never on chain.
  await chain.testClient.setAutomine(false)
  const late: string[] = []
  for (let i = 0; i < LATE; i++) {
    late.push(await askPayout(cluster, i % 3, supplier.apiKey, amount, `chaos-late-${i}`))
  }
  await until(async () => {
    const signed = await Promise.all(late.map((id) => store.hget(keys.payout(id), 'rawTx')))
    return signed.some(Boolean)
  }, 50)
  const suspended = await call(
    cluster.replicas[1]!.url,
    `/admin/v1/suppliers/${supplier.supplierId}`,
    cluster.adminToken,
    { status: 'suspended' },
    'PATCH',
  )
  expect(suspended.status).toBe(200)
  await chain.testClient.setAutomine(true)
  mining = true
  const lateMiner = (async () => {
    while (mining) {
      await chain.testClient.mine({ blocks: 1 }).catch(() => {})
      await Bun.sleep(150)
    }
  })()
  await allClosed(store, keys.payoutsOpen)
  mining = false
  await lateMiner
  const ids = [...asked, ...late]

  const rows = await Promise.all(ids.map((id) => store.hgetall(keys.payout(id))))
  const states = rows.map((r) => r.state)
  expect(states.every((s) => s === 'confirmed' || s === 'failed')).toBe(true)
  const confirmed = rows.filter((r) => r.state === 'confirmed')
  // the late payouts left unsigned at the suspension: withheld, nothing of them signed
  const withheld = rows.filter((r) => r.error === 'the supplier is suspended')
  expect(withheld.length).toBeGreaterThanOrEqual(LATE - 1)
  for (const r of withheld) expect([r.state, r.rawTx ?? '']).toEqual(['failed', ''])
  const transfers = await transfersFrom(chain, wallet.address)
  expect(transfers.map((t) => t.tx).sort()).toEqual(confirmed.map((r) => r.txHash as `0x${string}`).sort())
  expect(transfers.every((t) => t.to === getAddress(supplier.wallet) && t.value === BigInt(each))).toBe(true)
  expect(await chain.balanceOf(supplier.wallet)).toBe(BigInt(each * confirmed.length))
  const paidOut = Number(await store.hget(keys.supplier(supplier.supplierId), 'paidOut'))
  expect(paidOut).toBe(each * confirmed.length)

  const audit = await runCli(['audit', '--chain'], {
    REDIS_URL: testRedisUrl(),
    SVC_REDIS_PREFIX: cluster.prefix,
    ...chain.env(),
  })
  expect(audit.stdout).toContain(`audit: ${confirmed.length} confirmed payout(s) read on chain`)
  expect(audit.stdout).toContain('every invariant holds')
  expect(audit.code).toBe(0)
  console.log(
    `payouts chaos: ${PAYOUTS} + ${LATE} payouts of ${amount} USDC, replicas killed ${JSON.stringify(kills)}, ` +
      `${confirmed.length} confirmed, ${ids.length - confirmed.length} failed, ${transfers.length} transfers on chain, ` +
      `${Date.now() - started} ms`,
  )
}

/** Resolves once no payout is open (each confirmed or failed); at most a minute. */
async function allClosed(store: ReturnType<typeof createStore>, openSet: string) {
  const deadline = Date.now() + 60_000
  while ((await store.zcard(openSet)) > 0) {
    if (Date.now() > deadline) throw new Error('payouts still open after 60 s')
    await Bun.sleep(100)
  }
}
