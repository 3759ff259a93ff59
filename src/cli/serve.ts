import { loadGatewayConfig } from '../config.ts'
import { startGateway } from '../gateway.ts'
import { createLogger } from '../logger.ts'

export async function serve(): Promise<void> {
  const config = loadGatewayConfig()
  const logger = createLogger(config.logLevel)
  const gateway = await startGateway(config, logger)
  logger.info({ url: gateway.url }, 'svc-gateway listening')
  const shutdown = async () => {
    logger.info({ graceMs: config.inference.shutdownGraceMs }, 'draining')
    await gateway.drain(config.inference.shutdownGraceMs)
    logger.info('stopped')
    process.exit(0)
  }
  process.once('SIGTERM', shutdown)
  process.once('SIGINT', shutdown)
}
