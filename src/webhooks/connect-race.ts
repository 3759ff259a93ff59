// Happy Eyeballs (RFC 8305) for a host with several checked addresses: a connection to the first
// is started, and the next one a short delay later (at once when one fails), so an address that
// never answers a connection costs that delay, not the try's whole deadline. Only a TCP connection
// is opened and closed again, nothing sent on it: the request itself then goes to the address that
// answered first, once.
import { connect, type Socket } from 'node:net'

/** How long an attempt has alone before the next address's starts (RFC 8305's default). */
export const ATTEMPT_DELAY_MS = 250

/**
 * The first of `addresses` (tried in this order) a TCP connection to `port` opens to; null when
 * every attempt failed or `deadline` ended them first.
 */
export function firstToConnect(
  addresses: string[],
  port: number,
  deadline: AbortSignal,
  delayMs = ATTEMPT_DELAY_MS,
): Promise<string | null> {
  return new Promise((resolve) => {
    const sockets: Socket[] = []
    let next = 0
    let failed = 0
    let done = false
    let timer: ReturnType<typeof setTimeout> | undefined
    const finish = (address: string | null) => {
      if (done) return
      done = true
      clearTimeout(timer)
      deadline.removeEventListener('abort', aborted)
      for (const socket of sockets) socket.destroy()
      resolve(address)
    }
    const aborted = () => finish(null)
    const start = () => {
      clearTimeout(timer)
      if (done || next >= addresses.length) return
      const address = addresses[next++] as string
      const socket = connect({ host: address, port })
      sockets.push(socket)
      socket.once('connect', () => finish(address))
      socket.once('error', () => {
        if (++failed === addresses.length) finish(null)
        else start()
      })
      timer = setTimeout(start, delayMs)
    }
    if (deadline.aborted) return finish(null)
    deadline.addEventListener('abort', aborted, { once: true })
    start()
  })
}
