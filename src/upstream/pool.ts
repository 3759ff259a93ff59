// The idle connections, per origin: a connection goes back here only when its answer ended by its
// own framing and allows keep-alive, and the newest one is reused first.
import type { Connection } from './connection.ts'
import type { Origin } from './origin.ts'

const MAX_IDLE_PER_ORIGIN = 128
/** Idle connections close after this long (servers drop theirs after 5–60 s). */
const IDLE_TIMEOUT_S = 30

const idle = new Map<string, Connection[]>()

/** An open idle connection to the origin, taken off its list. */
export function takeIdle(origin: Origin): Connection | undefined {
  const list = idle.get(origin.key)
  while (list && list.length > 0) {
    const candidate = list.pop()!
    if (!candidate.closed) return candidate
  }
  return undefined
}

/** Onto its origin's idle list; false when the list is full (the caller closes it). */
export function parkIdle(connection: Connection): boolean {
  let list = idle.get(connection.origin.key)
  if (!list) {
    list = []
    idle.set(connection.origin.key, list)
  }
  if (list.length >= MAX_IDLE_PER_ORIGIN) return false
  connection.socket!.timeout(IDLE_TIMEOUT_S)
  list.push(connection)
  return true
}

/** Off its origin's idle list, if it is on it (it closed). */
export function forgetIdle(connection: Connection): void {
  const list = idle.get(connection.origin.key)
  const at = list?.indexOf(connection) ?? -1
  if (at >= 0) list!.splice(at, 1)
}

/** Closes every idle connection (tests, shutdown). */
export function closeIdleUpstreams(): void {
  for (const list of idle.values()) for (const connection of list.splice(0)) connection.close()
}
