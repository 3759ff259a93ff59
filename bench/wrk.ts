// Buffered load: wrk (Debian's package, one thread, its own process), driven by a generated Lua
// script that sends one POST and prints its summary as one JSON line (latencies in microseconds).
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { Target } from './stack.ts'

export interface WrkResult {
  requests: number
  durationUs: number
  rps: number
  /** Non-2xx answers, connection errors and timeouts: any is a failed run. */
  errors: number
  p50Ms: number
  p99Ms: number
}

const luaString = (s: string) => `"${s.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n')}"`

const SUMMARY = `
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'BENCH_JSON {"requests":%d,"durationUs":%d,"errors":%d,"p50":%d,"p99":%d}\\n',
    summary.requests, summary.duration, e.connect + e.read + e.write + e.status + e.timeout,
    latency:percentile(50), latency:percentile(99)))
end
`

function script(target: Target, body: string, dir: string, pauseMs: number): string {
  const lines = ['wrk.method = "POST"', `wrk.body = ${luaString(body)}`]
  // Paced clients: each connection waits about pauseMs (uniformly 0..2x) between its requests.
  if (pauseMs > 0) lines.push(`function delay() return math.random(0, ${2 * pauseMs}) end`)
  for (const [name, value] of Object.entries(target.headers)) {
    lines.push(`wrk.headers[${luaString(name)}] = ${luaString(value)}`)
  }
  const path = join(dir, `wrk-${target.name}.lua`)
  writeFileSync(path, `${lines.join('\n')}\n${SUMMARY}`)
  return path
}

export async function runWrk(
  target: Target,
  body: string,
  connections: number,
  seconds: number,
  dir: string,
  pauseMs = 0,
): Promise<WrkResult> {
  const proc = Bun.spawn(
    [
      'wrk',
      '-t1',
      `-c${connections}`,
      `-d${seconds}s`,
      '--timeout',
      '10s',
      '-s',
      script(target, body, dir, pauseMs),
      target.url,
    ],
    { stdout: 'pipe', stderr: 'pipe' },
  )
  const [out, err] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text()])
  await proc.exited
  const line = out.split('\n').find((l) => l.startsWith('BENCH_JSON '))
  if (!line) throw new Error(`wrk against ${target.name} printed no summary: ${out}${err}`)
  const raw = JSON.parse(line.slice('BENCH_JSON '.length)) as {
    requests: number
    durationUs: number
    errors: number
    p50: number
    p99: number
  }
  return {
    requests: raw.requests,
    durationUs: raw.durationUs,
    rps: raw.requests / (raw.durationUs / 1e6),
    errors: raw.errors,
    p50Ms: raw.p50 / 1000,
    p99Ms: raw.p99 / 1000,
  }
}
