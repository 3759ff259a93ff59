import pino, { type DestinationStream, type Logger } from 'pino'
import type { LogLevel } from './config.ts'

// Any URL: scheme, optional user part, host, then path, query and fragment up to whitespace or a
// quote (URLs sit inside error text and JSON).
const URL_PATTERN = /\b([a-z][a-z0-9+.-]*:\/\/)([^\s/?#@"'<>\\]*@)?([^\s/?#"'<>\\]*)([^\s"'<>\\]*)/gi

/**
 * Text fit for a log line or a response: every URL cut to its scheme and host. RPC and facilitator
 * providers put their key in the path, the query or the user part, and viem's and fetch's error
 * messages quote the whole URL.
 */
export function redactUrls(text: string): string {
  return text.replace(
    URL_PATTERN,
    (_url, scheme: string, user: string | undefined, host: string, rest: string) => {
      const tail = rest === '' || rest === '/' ? rest : '/[redacted]'
      return `${scheme}${user ? '[redacted]@' : ''}${host}${tail}`
    },
  )
}

/** The first line of an error's message: viem's short message when it has one. */
export function shortMessage(error: unknown): string {
  const e = error as { shortMessage?: string; message?: string }
  return (e?.shortMessage ?? e?.message ?? String(error)).split('\n')[0] as string
}

/** Every string in a serialized error (message, stack, cause, viem's url and details) redacted. */
function redactDeep(value: unknown, depth = 0): unknown {
  if (typeof value === 'string') return redactUrls(value)
  if (value === null || typeof value !== 'object' || depth > 8) return value
  if (Array.isArray(value)) return value.map((item) => redactDeep(item, depth + 1))
  const copy: Record<string, unknown> = {}
  for (const [key, item] of Object.entries(value)) copy[key] = redactDeep(item, depth + 1)
  return copy
}

/** `err`, an Error or its message, as pino writes it, with every URL in it redacted. */
export function redactedError(value: unknown): unknown {
  return redactDeep(value instanceof Error ? pino.stdSerializers.err(value) : value)
}

// JSON to stdout, no transport: pino's worker-thread transports hang the compiled binary.
// Secrets are redacted wherever a field of that name turns up, and URLs wherever an error is
// logged (always under `err`). Tests pass a destination to read every line the gateway writes.
export function createLogger(level: LogLevel, name = 'svc-gateway', destination?: DestinationStream): Logger {
  const options: pino.LoggerOptions = {
    name,
    level,
    base: undefined,
    serializers: { err: redactedError },
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
