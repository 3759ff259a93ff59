// Redis's MONITOR feed, read through `redis-cli monitor` in a process of its own: each command the
// server runs, in the order it ran them, as its arguments. A client library in monitor mode can take
// the feed's first line for the reply to a command it sent on connecting.
import { until } from './wait.ts'

export interface CommandFeed {
  /** Every command seen so far, as its arguments (the command's name first). */
  readonly seen: string[][]
  stop(): void
}

/** The arguments of one feed line: `<time> [<db> <client>] "NAME" "arg" ...`. */
function argsOf(line: string): string[] {
  return [...line.matchAll(/"((?:[^"\\]|\\.)*)"/g)].map(([, quoted]) => quoted!.replace(/\\(["\\])/g, '$1'))
}

export async function watchCommands(redisUrl: string): Promise<CommandFeed> {
  const child = Bun.spawn(['redis-cli', '-u', redisUrl, 'monitor'], { stdout: 'pipe', stderr: 'ignore' })
  const seen: string[][] = []
  let started = false
  void (async () => {
    let rest = ''
    for await (const chunk of child.stdout) {
      rest += new TextDecoder().decode(chunk)
      const lines = rest.split('\n')
      rest = lines.pop()!
      for (const line of lines) {
        if (line.trim() === 'OK') started = true
        else if (line.includes('"')) seen.push(argsOf(line))
      }
    }
  })()
  await until(() => started)
  return { seen, stop: () => child.kill() }
}
