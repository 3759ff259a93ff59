// `svc-gateway demo`: everything a newcomer needs on one machine: a local redis-server (unless
// REDIS_URL is set), the simulated supplier, and the gateway, with the lines to paste printed.
import { randomBytes } from 'node:crypto'
import { loadGatewayConfig } from '../config.ts'
import { startGateway } from '../gateway.ts'
import { createLogger } from '../logger.ts'
import { startLocalRedis } from '../redis/local-server.ts'
import { startSim } from '../sim/server.ts'
import { createDemoAccount, DEMO_CREDIT_USDC } from './demo-account.ts'
import { seedDemoOffers } from './demo-offers.ts'

export async function demo(): Promise<void> {
  const localRedis = process.env.REDIS_URL ? null : await startLocalRedis()
  const sim = startSim({ port: 0, tokensPerSecond: 40, ttftMs: 150 })
  const env = {
    ...process.env,
    PORT: process.env.PORT ?? '8080',
    HOST: process.env.HOST ?? '127.0.0.1',
    REDIS_URL: process.env.REDIS_URL ?? localRedis!.socketUrl,
    SVC_ADMIN_TOKEN: process.env.SVC_ADMIN_TOKEN ?? `demo_${randomBytes(24).toString('hex')}`,
    SVC_MASTER_KEY: process.env.SVC_MASTER_KEY ?? randomBytes(32).toString('hex'),
    SVC_UPSTREAM_URL: sim.url,
    // The simulated upstream's key the catalog asks its video quotes with.
    SVC_UPSTREAM_API_KEY: process.env.SVC_UPSTREAM_API_KEY ?? 'demo-catalog',
    LOG_LEVEL: process.env.LOG_LEVEL ?? 'warn',
  }
  // A bad environment or a start that fails (the port taken) must not leave the temporary
  // redis-server running, orphaned, with its folder (and holding the caller's stderr open).
  let gateway: Awaited<ReturnType<typeof startGateway>> | undefined
  let config: ReturnType<typeof loadGatewayConfig>
  let buyer: Awaited<ReturnType<typeof createDemoAccount>>
  let asks: Awaited<ReturnType<typeof seedDemoOffers>>
  try {
    config = loadGatewayConfig(env)
    gateway = await startGateway(config, createLogger(config.logLevel))
    buyer = await createDemoAccount(config)
    asks = await seedDemoOffers(config, sim.url)
  } catch (error) {
    await gateway?.stop().catch(() => {})
    await sim.stop()
    await localRedis?.stop()
    throw error
  }

  const base = gateway.url
  console.log(`svc-gateway demo is up.

  gateway            ${base}   (OpenAI base URL: ${base}/v1)
  simulated supplier ${sim.url}
  redis              ${config.redisUrl}${localRedis ? '  (temporary, removed on exit)' : ''}
  admin token        ${config.adminToken}
  demo account       ${buyer.accountId}  wallet ${buyer.wallet}  credited ${DEMO_CREDIT_USDC} USDC
  demo API key       ${buyer.apiKey}   (shown once; only its digest is stored)
  offers             ${asks.map((a) => `${a}¢`).join(', ')} per dollar of capacity (buyer max: ${config.defaultMaxPriceCents}¢)

In a browser:
  ${base}/dashboard  paste the demo API key: balances, spend, activity, keys, the ladder
  ${base}/admin      paste the admin token: the market, offers, suppliers, accounts, health
  ${base}/supplier   sign in with a browser wallet to sell capacity

Try it:
  curl ${base}/v1/models
  curl ${base}/v1/models/svc/llama-3.3-70b
  curl -H 'Authorization: Bearer ${buyer.apiKey}' ${base}/v1/agent/me
  curl ${base}/v1/capacity
  curl -i ${base}/v1/chat/completions -H 'Authorization: Bearer ${buyer.apiKey}' \\
    -H 'Content-Type: application/json' \\
    -d '{"model": "svc/llama-3.3-70b", "messages": [{"role": "user", "content": "Hello"}]}'

Prompt caching (glm-4.6 lists cache and long-prompt prices; the simulated supplier reads the
conversation so far from its cache, and the X-Svc-Cost-Usdc header bills those tokens at cache_input):
  curl ${base}/v1/models/svc/glm-4.6
  curl -i ${base}/v1/chat/completions -H 'Authorization: Bearer ${buyer.apiKey}' \\
    -H 'Content-Type: application/json' \\
    -d '{"model": "svc/glm-4.6", "messages": [{"role": "system", "content": "Answer in one line."}, {"role": "user", "content": "Hello"}]}'

OpenAI SDK (npm install openai), streaming, with the cost frame at the end:
  import OpenAI from 'openai'
  const client = new OpenAI({ apiKey: '${buyer.apiKey}', baseURL: '${base}/v1' })
  const stream = await client.chat.completions.create({
    model: 'svc/llama-3.3-70b', messages: [{ role: 'user', content: 'Hello' }], stream: true,
  })
  for await (const chunk of stream) {
    if (chunk.object === 'svc.cost') console.log('\\ncost', chunk.costUsdc, 'USDC')
    else process.stdout.write(chunk.choices[0]?.delta?.content ?? '')
  }

Ctrl-C stops everything.`)

  const shutdown = async () => {
    await gateway.stop()
    await sim.stop()
    await localRedis?.stop()
    process.exit(0)
  }
  process.once('SIGINT', shutdown)
  process.once('SIGTERM', shutdown)
}
