// Keeps one headless chromium for a parallel test run (see run-scope.ts): started by the first
// worker that needs a browser, closed once the run's coordinator has exited.
// Usage: bun browser-keeper.ts <coordinator pid> <file to write the endpoint to>
import { renameSync, rmSync, writeFileSync } from 'node:fs'
import { chromium } from 'playwright-core'
import { CHROMIUM, CHROMIUM_FLAGS } from './browser.ts'

const [coordinator, file] = [Number(process.argv[2]), process.argv[3]!]

function write(value: unknown) {
  writeFileSync(`${file}.tmp`, JSON.stringify(value))
  renameSync(`${file}.tmp`, file)
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

try {
  const server = await chromium.launchServer({
    executablePath: CHROMIUM,
    headless: true,
    args: CHROMIUM_FLAGS,
  })
  write({ wsEndpoint: server.wsEndpoint() })
  const watch = setInterval(async () => {
    if (alive(coordinator)) return
    clearInterval(watch)
    await server.close().catch(() => {})
    for (const path of [file, `${file}.lock`]) rmSync(path, { force: true })
    process.exit(0)
  }, 500)
} catch (error) {
  write({ error: String(error) })
  process.exit(1)
}
