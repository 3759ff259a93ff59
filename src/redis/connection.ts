// Telling Redis being away from a script's own errors (the store itself is store.ts).
/**
 * True for the errors Redis being unreachable gives, as opposed to a script's own errors. Read from
 * codes and messages only: the compiled binary is minified, so a class's name is not its source
 * name there (ioredis' MaxRetriesPerRequestError takes its name from its constructor).
 */
export function isRedisUnavailable(error: unknown): boolean {
  const e = error as { code?: unknown; message?: unknown } | null
  if (!e || typeof e !== 'object') return false
  const code = typeof e.code === 'string' ? e.code : ''
  const message = typeof e.message === 'string' ? e.message : ''
  if (code === 'ECONNREFUSED' || code === 'ECONNRESET' || code === 'EPIPE' || code === 'ETIMEDOUT')
    return true
  if (code === STORE_CLOSED) return true
  // Bun's native client (the script lane): a connection closed, not open yet, or timed out.
  if (code.startsWith('ERR_REDIS_CONNECTION')) return true
  return STORE_AWAY.test(message)
}

/**
 * ioredis with no offline queue or out of retries; a connection that ended; the replies of a
 * Redis that runs no command yet (loading its data set, a master or cluster not serving, a slot
 * being moved, a write sent to a node that is a replica now, a master without the replicas
 * `min-replicas-to-write` asks for), which refuse the command before it runs; and a Cluster client
 * that gave up following them (a failover or a slot move longer than its redirections), ended
 * while a command waited to be sent again (closed under it), or that ended reconnecting to none of
 * its nodes (what it had queued).
 */
const STORE_AWAY =
  /enableOfflineQueue|Connection is closed|Stream isn't writeable|max retries per request|Too many Cluster redirections|Cluster is ended|None of startup nodes is available|^(LOADING|MASTERDOWN|CLUSTERDOWN|TRYAGAIN|READONLY|NOREPLICAS)\b/i

const STORE_CLOSED = 'ERR_STORE_CLOSED'

/**
 * What a script sent to a store closed for good answers: Redis is away for it (a delivered clear
 * is kept), and no wait brings it back, so a call tried again while Redis is away stops on it.
 */
export function storeClosed(): Error {
  return Object.assign(new Error('the store is closed'), { code: STORE_CLOSED })
}

export function isStoreClosed(error: unknown): boolean {
  return (error as { code?: unknown } | null)?.code === STORE_CLOSED
}
