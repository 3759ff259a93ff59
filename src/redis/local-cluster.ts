// A throwaway Redis Cluster on loopback: `masters` redis-server processes joined as
// `redis-cli --cluster create` joins them, no replicas, every slot served before it returns. What
// `sizing` measures on and the test harness runs Cluster suites on; never used by `serve`.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { freePort } from './local-server.ts'

export interface ClusterNode {
  port: number
  dir: string
  /** kill -9 and remove its folder. */
  stop(): void
}

export interface LocalCluster {
  /** `redis+cluster://` naming every master, the first one first. */
  url: string
  nodes: ClusterNode[]
  stop(): void
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

async function waitFor(what: string, check: () => Promise<boolean>, ms = 15_000): Promise<void> {
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

/** `extraArgs`: further redis-server options for every node (as sizing's I/O threads). */
export async function startLocalCluster(masters = 3, extraArgs: string[] = []): Promise<LocalCluster> {
  const nodes = Array.from({ length: masters }, () =>
    clusterNode([
      '--cluster-enabled',
      'yes',
      '--cluster-config-file',
      'nodes.conf',
      '--appendonly',
      'no',
      ...extraArgs,
    ]),
  )
  const stop = () => {
    for (const n of nodes) n.stop()
  }
  try {
    for (const n of nodes)
      await waitFor(`node ${n.port}`, async () => (await redisCli('-p', String(n.port), 'ping')) === 'PONG')
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
    // Every node, not just one, must see every slot served before a client is pointed at it.
    for (const n of nodes)
      await waitFor('cluster_state:ok', async () =>
        (await redisCli('-p', String(n.port), 'cluster', 'info')).includes('cluster_state:ok'),
      )
  } catch (error) {
    stop()
    throw error
  }
  return { url: `redis+cluster://${nodes.map((n) => `127.0.0.1:${n.port}`).join(',')}`, nodes, stop }
}
