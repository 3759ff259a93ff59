// Which Redis a test file uses: the run's, which test/preload.ts records once per process (a
// parallel worker under --no-isolate runs many files after one preload), or a server of the file's
// own (ownRedis in stack.ts), for that file alone. Kept here, not in process.env: a command run
// in-process swaps the environment whole (cli.ts), and a file whose test or hook timed out may never
// reach the hook that puts things back; neither may leave a later file off the run's Redis.
import { afterAll } from 'bun:test'

let run: string | undefined
/** Each file's own server, by the file's path (Bun.main names the file running now). */
const own = new Map<string, { url: string; stop(): void | Promise<void> }>()

/** test/preload.ts: the run's Redis for every file this process runs. */
export function recordRunRedis(url: string): void {
  run = url
  process.env.TEST_REDIS_URL = url
  // Bun skips a file's later afterAll hooks once one times out: its own server is stopped here,
  // when the process's files are done, rather than outlive the run.
  afterAll(async () => {
    await Promise.all([...own.values()].map((server) => server.stop()))
    own.clear()
  })
}

/** The running file's Redis. Without the preload (a bench script), the caller's TEST_REDIS_URL. */
export function testRedisUrl(): string {
  const url = own.get(Bun.main)?.url ?? run ?? process.env.TEST_REDIS_URL
  if (!url) throw new Error('test/preload.ts did not start redis')
  return url
}

/**
 * Makes `server` the running file's Redis until the returned function stops it: whatever file runs
 * by then, only this file's entry goes.
 */
export function useOwnRedis(server: { url: string; stop(): void | Promise<void> }): () => Promise<void> {
  const file = Bun.main
  own.set(file, server)
  return async () => {
    if (own.get(file) === server) own.delete(file)
    await server.stop()
  }
}
