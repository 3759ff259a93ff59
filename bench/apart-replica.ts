// One gateway replica with its market held apart (src/market/steps.ts): `serve` with the layout
// set in code, which no operator setting chooses yet. Run by bench/sizing-apart.ts.
import { loadGatewayConfig } from '../src/config.ts'
import { startGateway } from '../src/gateway.ts'
import { createLogger } from '../src/logger.ts'

const config = loadGatewayConfig()
config.redisLayout = 'apart'
const gateway = await startGateway(config, createLogger(config.logLevel))
process.once('SIGTERM', async () => {
  await gateway.stop()
  process.exit(0)
})
