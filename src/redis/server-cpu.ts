// The CPU time a local redis-server has spent so far, as INFO reports it: what sizing and the
// benchmarks measure Redis's work per request by.
import Redis from 'ioredis'

export interface ServerCpu {
  /** User + system seconds of the whole process (its I/O threads too). */
  all: number
  /** Of it, the main thread's: what I/O threads cannot take over. */
  main: number
}

/** One section of INFO from the server on a loopback port. */
async function infoOf(port: number, section: string): Promise<string> {
  const redis = new Redis(port, '127.0.0.1', { lazyConnect: true, maxRetriesPerRequest: 1 })
  try {
    return await redis.info(section)
  } finally {
    redis.disconnect()
  }
}

/** Each server's CPU time so far, by its loopback port. */
export function serverCpu(ports: number[]): Promise<ServerCpu[]> {
  return Promise.all(
    ports.map(async (port) => {
      const info = await infoOf(port, 'cpu')
      const field = (name: string) => Number(new RegExp(`${name}:([\\d.]+)`).exec(info)?.[1] ?? 0)
      return {
        all: field('used_cpu_user') + field('used_cpu_sys'),
        main: field('used_cpu_user_main_thread') + field('used_cpu_sys_main_thread'),
      }
    }),
  )
}

/** Each server's process id, by its loopback port. */
export function serverPids(ports: number[]): Promise<number[]> {
  return Promise.all(
    ports.map(async (port) => Number(/process_id:(\d+)/.exec(await infoOf(port, 'server'))?.[1])),
  )
}
