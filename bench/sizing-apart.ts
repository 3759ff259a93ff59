// `svc-gateway sizing` for a market held apart against the same market on one slot, in one run:
// paid requests/s, Redis CPU per paid request and the busiest master's share, per layout.
//   bun bench/sizing-apart.ts [masters=1,3] [replicas=1,2,4] [offers=6] [seconds=5] [clients=32]

import { measureSizing, sizingTable } from '../src/cli/sizing.ts'
import type { SizingOptions } from '../src/cli/sizing-options.ts'

const [masters = '1,3', replicas = '1,2,4', offers = '6', seconds = '5', clients = '32'] =
  process.argv.slice(2)
const list = (value: string) => value.split(',').map(Number)
const base: SizingOptions = {
  masters: list(masters),
  replicas: list(replicas),
  clients: Number(clients),
  seconds: Number(seconds),
  offers: Number(offers),
}
for (const options of [base, { ...base, layout: 'apart' as const }]) {
  const rows = await measureSizing(options, (line) =>
    console.error(`[sizing ${options.layout ?? 'one-slot'}] ${line}`),
  )
  console.log(`${sizingTable(rows, options)}\n`)
}
