// A TCP proxy in front of a real redis-server that can misbehave on cue: lose the reply of a
// command Redis ran (the store dying just after a clear commits), or answer a command with an
// error in Redis's place without sending it on (a script that refused), or hold the replies of a
// command Redis ran until let through (a slow answer), or swallow commands so they are in flight
// when the store goes away. Everything else passes.
import type { Socket, TCPSocketListener } from 'bun'

interface Pair {
  client: Socket<Pair>
  server: Socket<Pair> | null
  /** Bytes the client sent before the server side was open. */
  pending: Uint8Array[]
  /** The server's next reply on this pair is dropped and the store goes away. */
  dropNextReply: boolean
  /** The client's last bytes, so that a marker split between two reads is still found. */
  tail: Buffer
  /** Replies held back, in order, until letReplies(); null while replies pass. */
  heldReplies: Uint8Array[] | null
}

type Cue =
  | { kind: 'lose-reply'; markers: string[] }
  | { kind: 'error-reply'; markers: string[]; error: string }
  | { kind: 'hold-reply'; markers: string[] }

export interface RedisProxy {
  url: string
  /** The next command holding a marker runs on Redis, its reply is lost, and the store stays away until up(). */
  loseReplyOf(marker: string | string[]): void
  /** The next command holding a marker is answered with `error` and never reaches Redis. */
  refuse(marker: string | string[], error: string): void
  /**
   * The next command holding a marker runs on Redis, and its reply (with every later reply on its
   * connection, in order) is held until letReplies().
   */
  holdReplyOf(marker: string | string[]): void
  /** Sends the held replies on; replies pass again. */
  letReplies(): void
  /** Resolves once the cue fired. */
  fired(): Promise<void>
  /** From now until down(), commands are swallowed: sent, never run, never answered. */
  hold(): void
  /** Resolves once a command was swallowed. */
  held(): Promise<void>
  /** Connections are refused (accepted and closed) while down. */
  down(): void
  up(): void
  stop(): void
}

/** Longer than any marker: what of a client's last read is kept to find one split across reads. */
const MARKER_TAIL = 64

export function startRedisProxy(target: { host: string; port: number }): RedisProxy {
  const pairs = new Set<Pair>()
  let away = false
  let cue: Cue | null = null
  let onFired: (() => void) | null = null
  let firedOnce: Promise<void> = Promise.resolve()
  let holding = false
  let onHeld: (() => void) | null = null
  let heldOnce: Promise<void> = Promise.resolve()

  const closeAll = () => {
    for (const pair of pairs) {
      pair.client.end()
      pair.server?.end()
    }
    pairs.clear()
  }

  const listener: TCPSocketListener<Pair> = Bun.listen<Pair>({
    hostname: '127.0.0.1',
    port: 0,
    socket: {
      open(client) {
        if (away) {
          client.end()
          return
        }
        const pair: Pair = {
          client,
          server: null,
          pending: [],
          dropNextReply: false,
          tail: Buffer.alloc(0),
          heldReplies: null,
        }
        client.data = pair
        pairs.add(pair)
        Bun.connect<Pair>({
          hostname: target.host,
          port: target.port,
          socket: {
            open(server) {
              server.data = pair
              pair.server = server
              for (const chunk of pair.pending) server.write(chunk)
              pair.pending = []
            },
            data(_server, chunk) {
              if (pair.dropNextReply) {
                // Redis ran it; its answer dies with the store.
                pair.dropNextReply = false
                away = true
                closeAll()
                onFired?.()
                return
              }
              if (pair.heldReplies) pair.heldReplies.push(chunk)
              else pair.client.write(chunk)
            },
            close() {
              pair.client.end()
              pairs.delete(pair)
            },
            error() {
              pair.client.end()
            },
          },
        }).catch(() => client.end())
      },
      data(client, chunk) {
        const pair = client.data
        if (holding) {
          onHeld?.()
          return
        }
        const active = cue
        // A command can reach the proxy in two reads (its sender wrote it in parts, or the machine
        // is busy): the marker is looked for across the boundary too.
        const bytes = Buffer.concat([pair.tail, chunk])
        pair.tail = bytes.subarray(Math.max(0, bytes.length - MARKER_TAIL))
        if (active?.markers.some((m) => bytes.includes(m))) {
          cue = null
          pair.tail = Buffer.alloc(0)
          if (active.kind === 'error-reply') {
            client.write(`-${active.error}\r\n`)
            onFired?.()
            return
          }
          if (active.kind === 'hold-reply') {
            pair.heldReplies = []
            onFired?.()
          } else pair.dropNextReply = true
        }
        if (pair.server) pair.server.write(chunk)
        else pair.pending.push(chunk)
      },
      close(client) {
        client.data?.server?.end()
        if (client.data) pairs.delete(client.data)
      },
      error() {},
    },
  })

  const arm = (next: Cue) => {
    cue = next
    firedOnce = new Promise((resolve) => {
      onFired = resolve
    })
  }

  return {
    url: `redis://127.0.0.1:${listener.port}`,
    loseReplyOf: (marker) => arm({ kind: 'lose-reply', markers: [marker].flat() }),
    refuse: (marker, error) => arm({ kind: 'error-reply', markers: [marker].flat(), error }),
    holdReplyOf: (marker) => arm({ kind: 'hold-reply', markers: [marker].flat() }),
    letReplies() {
      for (const pair of pairs) {
        const held = pair.heldReplies ?? []
        pair.heldReplies = null
        for (const chunk of held) pair.client.write(chunk)
      }
    },
    fired: () => firedOnce,
    hold() {
      holding = true
      heldOnce = new Promise((resolve) => {
        onHeld = resolve
      })
    },
    held: () => heldOnce,
    down() {
      holding = false
      away = true
      closeAll()
    },
    up() {
      away = false
    },
    stop() {
      closeAll()
      listener.stop(true)
    },
  }
}
