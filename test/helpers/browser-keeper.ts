// Keeps one headless chromium for a parallel test run (see run-scope.ts): started by the first
// worker that needs a browser, closed once the run's coordinator has exited.
import { chromium } from 'playwright-core'
import { CHROMIUM, CHROMIUM_FLAGS } from './browser.ts'
import { keepForRun } from './run-scope.ts'

await keepForRun(async () => {
  const server = await chromium.launchServer({
    executablePath: CHROMIUM,
    headless: true,
    args: CHROMIUM_FLAGS,
  })
  return { value: { wsEndpoint: server.wsEndpoint() }, stop: () => server.close() }
})
