// Runs the stream client (bench/stream-client.ts) as its own process, so the load never shares a
// process with what it measures.
import { join } from 'node:path'
import type { StreamClientJob, StreamClientResult } from './stream-client.ts'

const CLIENT = join(import.meta.dir, 'stream-client.ts')

export async function runStreamClient(
  job: StreamClientJob,
  onOpen?: (opened: number, ms: number) => Promise<void>,
): Promise<StreamClientResult> {
  const proc = Bun.spawn([process.execPath, CLIENT, JSON.stringify(job)], {
    stdout: 'pipe',
    stderr: 'inherit',
    env: { ...process.env, BUN_CONFIG_MAX_HTTP_REQUESTS: '8192' },
  })
  let result: StreamClientResult | null = null
  let buffer = ''
  const decoder = new TextDecoder()
  for await (const bytes of proc.stdout) {
    buffer += decoder.decode(bytes, { stream: true })
    const lines = buffer.split('\n')
    buffer = lines.pop()!
    for (const line of lines) {
      if (line.startsWith('OPEN ') && onOpen) {
        const [, opened, ms] = line.split(' ')
        await onOpen(Number(opened), Number(ms))
      } else if (line.startsWith('RESULT ')) {
        result = JSON.parse(line.slice('RESULT '.length)) as StreamClientResult
      }
    }
  }
  await proc.exited
  if (!result) throw new Error(`stream client exited ${proc.exitCode} without a result`)
  return result
}
