// Where Redis is: one server, a Sentinel group or a Cluster, from one REDIS_URL.

export type RedisTarget =
  | { kind: 'single'; url: string }
  | {
      kind: 'sentinel' | 'cluster'
      nodes: { host: string; port: number }[]
      name: string
      password?: string
      tls: boolean
    }

/**
 * REDIS_URL in its three forms, each an ioredis mode: `redis[s]://host:port` (one server),
 * `redis[s]+sentinel://[:password@]host:port[,host:port]/master-name`, and
 * `redis[s]+cluster://[:password@]host:port[,host:port]`. One hash tag in the key prefix keeps
 * every script's keys in one slot, so the same scripts run on all three.
 */
export function parseRedisTarget(url: string): RedisTarget {
  const match = /^(rediss?)\+(sentinel|cluster):\/\/(?:([^@/]*)@)?([^/?]+)(?:\/([^?]*))?/.exec(url)
  if (!match) return { kind: 'single', url }
  const [, scheme, kind, auth, hosts, name] = match
  const nodes = hosts!.split(',').map((hostPort) => {
    const at = hostPort.lastIndexOf(':')
    return { host: hostPort.slice(0, at), port: Number(hostPort.slice(at + 1)) }
  })
  if (nodes.some((n) => !n.host || !Number.isInteger(n.port) || n.port <= 0))
    throw new Error(`bad Redis nodes in ${kind} URL`)
  if (kind === 'sentinel' && !name) throw new Error('a sentinel URL ends in /<master name>')
  const password = auth ? decodeURIComponent(auth.replace(/^[^:]*:/, '')) : undefined
  return { kind: kind as 'sentinel' | 'cluster', nodes, name: name ?? '', password, tls: scheme === 'rediss' }
}
