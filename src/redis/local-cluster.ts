// A throwaway Redis Cluster on loopback: `masters` redis-server processes joined as
// `redis-cli --cluster create` joins them, every slot served before it returns; with `replicas`, a
// replica for each master, in sync before it returns, so that killing a master fails over. What
// `sizing` measures on and the test harness and the chaos suite run Cluster suites on; never used
// by `serve`.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { freePort } from './local-server.ts'

export interface ClusterNode {
  port: number
  dir: string
  /** True once the process has ended (one that could not bind its port ends at start). */
  readonly exited: boolean
  /** kill -9 and remove its folder. */
  stop(): void
}

export interface LocalCluster {
  /** `redis+cluster://` naming every master, the first one first. */
  url: string
  /** The masters as started (a failover can make one of `replicas` a master since). */
  nodes: ClusterNode[]
  /** With `replicas`, `replicas[i]` replicating `nodes[i]`; else empty. */
  replicas: ClusterNode[]
  stop(): void
}

export interface LocalClusterOptions {
  /** One replica per master. */
  replicas?: boolean
  /**
   * `cluster-node-timeout`: how long a master may be unreachable before its replica takes over
   * (Redis's default is 15 s; a test that kills a master wants about one).
   */
  nodeTimeoutMs?: number
}

/** One redis-server on a free loopback port, in a fresh folder, without snapshots. */
export function clusterNode(args: string[]): ClusterNode {
  const dir = mkdtempSync(join(tmpdir(), 'svc-topo-'))
  const port = freePort()
  const child = Bun.spawn(
    ['redis-server', '--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '', ...args],
    { stdout: 'ignore', stderr: 'ignore' },
  )
  return {
    port,
    dir,
    get exited() {
      return child.exitCode !== null || child.signalCode !== null
    },
    stop() {
      child.kill('SIGKILL')
      rmSync(dir, { recursive: true, force: true })
    },
  }
}

export async function redisCli(...args: string[]): Promise<string> {
  const child = Bun.spawn(['redis-cli', ...args], { stdout: 'pipe', stderr: 'pipe' })
  return (await new Response(child.stdout).text()).trim()
}

// Gossip carries a node's role to the others a few times a second; on a machine whose cores are
// taken by other work (a parallel test suite's other clusters) it can take far longer, so the
// bound is generous: a step that is ready returns at once all the same.
async function waitFor(what: string, check: () => Promise<boolean>, ms = 60_000): Promise<void> {
  const deadline = Date.now() + ms
  while (Date.now() < deadline) {
    if (await check().catch(() => false)) return
    await Bun.sleep(100)
  }
  throw new Error(`timed out waiting for ${what}`)
}

const SLOTS = 16_384

/** The masters' slot ranges, split as `redis-cli --cluster create` splits them. */
function slotRanges(masters: number): [number, number][] {
  const perNode = SLOTS / masters
  let first = 0
  return Array.from({ length: masters }, (_, i) => {
    const last = i === masters - 1 ? SLOTS - 1 : Math.max(first, Math.round(i * perNode + perNode - 1))
    const range: [number, number] = [first, last]
    first = last + 1
    return range
  })
}

/** A node's `CLUSTER NODES` lines, split into fields. */
async function clusterNodes(port: number): Promise<string[][]> {
  const text = await redisCli('-p', String(port), 'cluster', 'nodes')
  return text
    .split('\n')
    .filter(Boolean)
    .map((line) => line.split(' '))
}

/** `extraArgs`: further redis-server options for every node (as sizing's I/O threads). */
export async function startLocalCluster(
  masters = 3,
  extraArgs: string[] = [],
  options: LocalClusterOptions = {},
): Promise<LocalCluster> {
  const start = () =>
    clusterNode([
      '--cluster-enabled',
      'yes',
      '--cluster-config-file',
      'nodes.conf',
      '--appendonly',
      'no',
      ...(options.nodeTimeoutMs ? ['--cluster-node-timeout', String(options.nodeTimeoutMs)] : []),
      // A replica's first sync at once, not after the 5 s a master waits for more replicas to join it.
      '--repl-diskless-sync-delay',
      '0',
      ...extraArgs,
    ])
  const nodes = Array.from({ length: masters }, start)
  const replicas = options.replicas ? Array.from({ length: masters }, start) : []
  const stop = () => {
    for (const n of [...nodes, ...replicas]) n.stop()
  }
  try {
    // A node binds its port and its bus port (port + 10,000), which freePort() cannot hold for it:
    // one that ended at start lost a port to another process, and is started again on another.
    for (const group of [nodes, replicas])
      for (const [i, first] of group.entries()) {
        let n = first
        for (let tries = 1; ; tries++) {
          const up = async () => (await redisCli('-p', String(n.port), 'ping')) === 'PONG'
          await waitFor(`node ${n.port}`, async () => n.exited || (await up()))
          if (!n.exited) break
          n.stop()
          if (tries === 5)
            throw new Error(`redis-server could not start on 5 ports in a row (last ${n.port})`)
          n = start()
          group[i] = n
        }
      }
    // What `redis-cli --cluster create` does, without its one-second waits for the join: each
    // master takes its range of slots and its own config epoch, then meets every other one (each
    // learns the others' slots first hand instead of by gossip, which takes seconds).
    const ranges = slotRanges(nodes.length)
    for (const [i, n] of nodes.entries()) {
      const port = String(n.port)
      const [first, last] = ranges[i]!
      await redisCli('-p', port, 'cluster', 'addslotsrange', String(first), String(last))
      await redisCli('-p', port, 'cluster', 'set-config-epoch', String(i + 1))
    }
    for (const a of nodes)
      for (const b of nodes)
        if (a !== b) await redisCli('-p', String(a.port), 'cluster', 'meet', '127.0.0.1', String(b.port))
    if (replicas.length > 0) await attachReplicas(nodes, replicas)
    // Every node, not just one, must see every slot served before a client is pointed at it.
    for (const n of [...nodes, ...replicas])
      await waitFor('cluster_state:ok', async () =>
        (await redisCli('-p', String(n.port), 'cluster', 'info')).includes('cluster_state:ok'),
      )
  } catch (error) {
    stop()
    throw error
  }
  return {
    url: `redis+cluster://${nodes.map((n) => `127.0.0.1:${n.port}`).join(',')}`,
    nodes,
    replicas,
    stop,
  }
}

/**
 * Each replica meets the masters and replicates its own; returns once each is in sync and every
 * master lists every replica under its master (the masters vote in a failover: one that does not
 * know a replica would not elect it).
 */
async function attachReplicas(masters: ClusterNode[], replicas: ClusterNode[]): Promise<void> {
  const ids = await Promise.all(masters.map((m) => redisCli('-p', String(m.port), 'cluster', 'myid')))
  for (const [i, replica] of replicas.entries()) {
    const port = String(replica.port)
    for (const m of masters) await redisCli('-p', port, 'cluster', 'meet', '127.0.0.1', String(m.port))
    // CLUSTER REPLICATE needs the master known to the replica first.
    await waitFor(`replica ${port} to know its master`, async () =>
      (await clusterNodes(replica.port)).some(([id, , flags]) => id === ids[i] && flags!.includes('master')),
    )
    const answer = await redisCli('-p', port, 'cluster', 'replicate', ids[i]!)
    if (answer !== 'OK') throw new Error(`cluster replicate on ${port}: ${answer}`)
  }
  for (const replica of replicas)
    await waitFor(`replica ${replica.port} in sync`, async () =>
      (await redisCli('-p', String(replica.port), 'info', 'replication')).includes('master_link_status:up'),
    )
  // A master learns a replica's new role from the replica's next ping, which gossip may put off for
  // seconds; a MEET makes each master and replica exchange their headers now (the known node's role
  // is read off its answer, and the handshake's stand-in dropped).
  for (const m of masters)
    for (const replica of replicas)
      await redisCli('-p', String(m.port), 'cluster', 'meet', '127.0.0.1', String(replica.port))
  for (const m of masters)
    await waitFor(`master ${m.port} to know the replicas`, async () => {
      const slaves = (await clusterNodes(m.port)).filter(([, , flags]) => flags!.includes('slave'))
      return slaves.length === replicas.length && slaves.every(([, , , master]) => ids.includes(master!))
    })
}
