import { loadGatewayConfig } from '../config.ts'
import { startGateway } from '../gateway.ts'
import { createLogger } from '../logger.ts'

/**
 * The exit code of a stop that left clears of delivered answers neither committed nor written to
 * SVC_JOURNAL_DIR: their buyers were served and will never be charged (README, "Exit codes").
 */
export const EXIT_CLEARS_LOST = 3

export async function serve(): Promise<void> {
  const config = loadGatewayConfig()
  const logger = createLogger(config.logLevel)
  const gateway = await startGateway(config, logger)
  logger.info({ url: gateway.url }, 'svc-gateway listening')
  const shutdown = async () => {
    logger.info({ graceMs: config.inference.shutdownGraceMs }, 'draining')
    const { keptClears, lostClears } = await gateway.drain(config.inference.shutdownGraceMs)
    if (lostClears > 0) {
      logger.error({ lostClears, exitCode: EXIT_CLEARS_LOST }, 'stopped with clears lost')
      process.exit(EXIT_CLEARS_LOST)
    }
    logger.info({ keptClears }, 'stopped')
    process.exit(0)
  }
  process.once('SIGTERM', shutdown)
  process.once('SIGINT', shutdown)
}
