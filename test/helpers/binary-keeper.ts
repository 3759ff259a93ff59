// Keeps one compiled binary for a parallel test run (see run-scope.ts): built by the first worker
// that needs it, removed once the run's coordinator has exited.
import { rmSync } from 'node:fs'
import { dirname } from 'node:path'
import { buildBinary } from './binary.ts'
import { keepForRun } from './run-scope.ts'

await keepForRun(async () => {
  const path = await buildBinary()
  return { value: { path }, stop: async () => rmSync(dirname(path), { recursive: true, force: true }) }
})
