import pino, { type DestinationStream, type Logger } from 'pino'
import type { LogLevel } from './config.ts'

// JSON to stdout, no transport: pino's worker-thread transports hang the compiled binary.
// Secrets are redacted wherever a field of that name turns up. Tests pass a destination to read
// every line the gateway writes.
export function createLogger(level: LogLevel, name = 'svc-gateway', destination?: DestinationStream): Logger {
  const options: pino.LoggerOptions = {
    name,
    level,
    base: undefined,
    redact: {
      paths: [
        'authorization',
        'apiKey',
        'upstreamApiKey',
        'adminToken',
        'masterKey',
        '*.authorization',
        '*.apiKey',
        '*.upstreamApiKey',
        'headers.authorization',
        'headers.cookie',
      ],
      censor: '[redacted]',
    },
  }
  return destination ? pino(options, destination) : pino(options)
}
