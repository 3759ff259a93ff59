// `svc-gateway` run from source as a child process, with only the environment given (and PATH).
import { join } from 'node:path'

const main = join(import.meta.dir, '../../src/main.ts')

export interface CliResult {
  stdout: string
  stderr: string
  code: number
}

export async function runCli(args: string[], env: Record<string, string>): Promise<CliResult> {
  const child = Bun.spawn([process.execPath, main, ...args], {
    env: { PATH: process.env.PATH, ...env },
    stdout: 'pipe',
    stderr: 'pipe',
  })
  const [stdout, stderr, code] = await Promise.all([
    new Response(child.stdout).text(),
    new Response(child.stderr).text(),
    child.exited,
  ])
  return { stdout, stderr, code }
}
