// Cores of their own for sizing's Redis masters, as a deployment gives each master a machine or a
// core: on a shared box the scheduler otherwise puts a master beside a busy replica, on the same
// core or its hyperthread sibling, and the figures follow where it happened to land. Linux only:
// the topology comes from sysfs and the pinning from util-linux's `taskset`.
import { spawnSync } from 'node:child_process'
import { readdirSync, readFileSync } from 'node:fs'

export interface PinPlan {
  /** One CPU per master, each on a physical core whose other threads run nothing. */
  redis: number[]
  /** Every CPU of the other physical cores: the replicas, the supplier and the load. */
  rest: number[]
}

const CPU_DIR = '/sys/devices/system/cpu'

/** This machine's physical cores, each as the CPUs (hyperthreads) it runs, lowest first. */
export function physicalCores(cpuDir = CPU_DIR): number[][] {
  const cores = new Map<string, number[]>()
  for (const name of readdirSync(cpuDir)) {
    const match = /^cpu(\d+)$/.exec(name)
    if (!match) continue
    let siblings: string
    try {
      siblings = readFileSync(`${cpuDir}/${name}/topology/thread_siblings_list`, 'utf8').trim()
    } catch {
      siblings = match[1]!
    }
    const core = cores.get(siblings) ?? []
    core.push(Number(match[1]))
    cores.set(siblings, core)
  }
  return [...cores.values()].map((cpus) => cpus.sort((a, b) => a - b)).sort((a, b) => a[0]! - b[0]!)
}

/** `count` physical cores for Redis, one CPU of each used, and the other cores for the rest. */
export function pinPlan(count: number, cores = physicalCores()): PinPlan {
  if (cores.length < count + 1)
    throw new Error(`--pin ${count}: this machine has ${cores.length} physical cores, and the rest need one`)
  // The highest cores for Redis: CPU 0 keeps the interrupts the kernel tends to send it.
  const redisCores = cores.slice(cores.length - count)
  return { redis: redisCores.map((core) => core[0]!), rest: cores.slice(0, cores.length - count).flat() }
}

/** Moves every thread of `pid` onto `cpus`; what it starts afterwards inherits them. */
export function pinProcess(pid: number, cpus: number[]): void {
  const result = spawnSync('taskset', ['-a', '-p', '-c', cpus.join(','), String(pid)], { encoding: 'utf8' })
  if (result.error)
    throw new Error(`taskset: ${result.error.message} (util-linux's taskset is needed for --pin)`)
  if (result.status !== 0) throw new Error(`taskset -p ${pid}: ${result.stderr.trim()}`)
}

/** The CPUs `pid`'s main thread may run on. */
export function cpusOf(pid: number): number[] {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8')
  const list = /Cpus_allowed_list:\s*(\S+)/.exec(status)?.[1] ?? ''
  return list.split(',').flatMap((part) => {
    const [from, to] = part.split('-').map(Number)
    return Array.from({ length: (to ?? from!) - from! + 1 }, (_, i) => from! + i)
  })
}
