// A throwaway Redis Cluster on loopback: `masters` redis-server processes joined with
// `redis-cli --cluster create`, no replicas, every slot served before it returns. What `sizing`
// measures on and the test harness runs Cluster suites on; never used by `serve`.
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
    await redisCli(
      '--cluster',
      'create',
      ...nodes.map((n) => `127.0.0.1:${n.port}`),
      '--cluster-replicas',
      '0',
      '--cluster-yes',
    )
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
