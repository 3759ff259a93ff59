// Preloaded into a gateway run from source by bench/heap.ts: on SIGUSR2, writes the JS heap's size
// and its object counts by type (bun:jsc heapStats) to the file named by BENCH_HEAP_FILE.

import { heapStats } from 'bun:jsc'
import { appendFileSync } from 'node:fs'

process.on('SIGUSR2', () => {
  Bun.gc(true)
  appendFileSync(process.env.BENCH_HEAP_FILE!, `${JSON.stringify(heapStats())}\n`)
})
