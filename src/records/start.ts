// Every replica runs one records worker, on a connection of its own (its reads block).
import type { Logger } from 'pino'
import type { GatewayConfig } from '../config.ts'
import { createRedis } from '../redis/connection.ts'
import type { Keyspace } from '../redis/keys.ts'
import { consumerName, type RunningWorker, runWorker } from './worker.ts'

export function startRecordsWorker(
  config: GatewayConfig,
  keys: Keyspace,
  logger: Logger,
): Promise<RunningWorker> {
  const { records } = config
  return runWorker(
    createRedis(config.redisUrl, { name: 'svc-records' }),
    keys,
    {
      consumer: consumerName(),
      batchSize: records.batchSize,
      blockMs: 1_000,
      claimIdleMs: records.claimIdleMs,
      streamRetentionMs: records.streamRetentionMs,
      recordRetentionDays: records.recordRetentionDays,
    },
    logger,
  )
}
