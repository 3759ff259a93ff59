// `svc-gateway sizing` on real processes: a single redis-server and a three-master Cluster, two
// gateway replicas each, two offers, the simulated supplier; every row served paid requests, none failed, and
// the Redis CPU was read from every master.
import { describe, expect, test } from 'bun:test'
import { cpusOf, physicalCores } from '../../src/cli/cpu-pinning.ts'
import { measureSizing, offerCap, sizingTable } from '../../src/cli/sizing.ts'
import { sizingOptions } from '../../src/cli/sizing-options.ts'

describe('sizing', () => {
  test('options: the defaults, and a clear refusal of what is not a list of counts', () => {
    expect(sizingOptions([])).toEqual({
      masters: [1, 3],
      replicas: [1, 2, 4, 8],
      clients: 32,
      seconds: 5,
      ioThreads: 1,
      layout: 'one-slot',
      offers: 1,
      accounts: 32,
    })
    // One account per client unless told.
    expect(sizingOptions(['--clients', '8']).accounts).toBe(8)
    expect(sizingOptions(['--clients', '8', '--accounts', '64']).accounts).toBe(64)
    expect(() => sizingOptions(['--accounts', '0'])).toThrow(/--accounts/)
    expect(sizingOptions(['--layout', 'apart', '--offers', '6'])).toMatchObject({
      layout: 'apart',
      offers: 6,
    })
    expect(() => sizingOptions(['--layout', 'sideways'])).toThrow(/--layout: one of one-slot, apart/)
    expect(sizingOptions(['--io-threads', '4']).ioThreads).toBe(4)
    expect(sizingOptions(['--masters', '3', '--replicas=2,4', '--seconds', '2'])).toMatchObject({
      masters: [3],
      replicas: [2, 4],
      seconds: 2,
    })
    expect(() => sizingOptions(['--masters', '0'])).toThrow(/--masters/)
    expect(() => sizingOptions(['--replicas', 'two'])).toThrow(/--replicas/)
    expect(() => sizingOptions(['--rounds', '2'])).toThrow(/unknown option --rounds/)
    expect(() => sizingOptions(['--clients'])).toThrow(/needs a value/)
    expect(sizingOptions(['--offers', '24', '--max-in-flight', '1'])).toMatchObject({
      offers: 24,
      maxInFlight: 1,
    })
    // Each offer's cap: room for every client of every replica unless told.
    expect(offerCap(sizingOptions(['--offers', '24']), 2)).toBe(4)
    expect(offerCap(sizingOptions(['--offers', '24', '--max-in-flight', '1']), 2)).toBe(1)
    expect(() => sizingOptions(['--max-in-flight', '0'])).toThrow(/--max-in-flight: a whole number from 1/)
    expect(() => sizingOptions(['--max-in-flight', '1.5'])).toThrow(/--max-in-flight/)
    expect(sizingOptions(['--masters', '1,3', '--pin', '3']).pin).toBe(3)
    expect(() => sizingOptions(['--masters', '1,3', '--pin', '2'])).toThrow(
      /--pin 2: fewer cores than masters \(3\)/,
    )
  })

  test('one and three masters under two replicas: paid requests served, Redis CPU per request and the busiest master', async () => {
    // No warm-up: what is asserted holds from the first request, and each warm-up costs a
    // second of both cores and a load process per replica.
    // Two offers splitting the load by their in-flight caps, and eight accounts per replica.
    const options = {
      masters: [1, 3],
      replicas: [2],
      clients: 4,
      seconds: 1,
      warmSeconds: 0,
      offers: 2,
      accounts: 8,
    }
    const rows = await measureSizing(options)
    expect(rows.map((r) => [r.masters, r.replicas])).toEqual([
      [1, 2],
      [3, 2],
    ])
    for (const row of rows) {
      expect(row.failed).toBe(0)
      expect(row.requestsPerSecond).toBeGreaterThan(0)
      expect(row.redisUsPerRequest).toBeGreaterThan(0)
      // The main threads do part of the work, never more than all of it (read a moment apart).
      expect(row.mainThreadUsPerRequest).toBeGreaterThan(0)
      expect(row.mainThreadUsPerRequest).toBeLessThanOrEqual(row.redisUsPerRequest + 1)
    }
    expect(rows[0]!.busiestShare).toBe(1)
    // Three masters share the CPU somehow; no master carries less than nothing or more than all.
    expect(rows[1]!.busiestShare).toBeGreaterThanOrEqual(1 / 3)
    expect(rows[1]!.busiestShare).toBeLessThanOrEqual(1)
    const table = sizingTable(rows, options)
    expect(table).toContain('| 1 | 2 |')
    expect(table).toContain('| 3 | 2 |')
    expect(table).toContain('the market on one slot, 2 offers, 8 accounts per replica')
  })

  test("offers' caps that bind: the requests beyond them wait and are served, none failed", async () => {
    // Eight clients over two offers of one request at a time: six wait for a slot at any moment.
    const options = {
      masters: [1],
      replicas: [2],
      clients: 4,
      seconds: 1,
      warmSeconds: 0,
      offers: 2,
      maxInFlight: 1,
    }
    const [row] = await measureSizing(options)
    expect(row!.failed).toBe(0)
    expect(row!.requestsPerSecond).toBeGreaterThan(0)
    expect(sizingTable([row!], options)).toContain('2 offers of 1 in flight each')
  })

  test('held apart on three masters, the replicas started with the layout: the masters share the work', async () => {
    // A replica started without the layout would refuse the market sizing recorded as held apart.
    const options = {
      masters: [3],
      replicas: [1],
      clients: 4,
      seconds: 1,
      warmSeconds: 0,
      offers: 6,
      accounts: 8,
      layout: 'apart' as const,
    }
    const [row] = await measureSizing(options)
    expect(row!.failed).toBe(0)
    expect(row!.requestsPerSecond).toBeGreaterThan(0)
    // Six offers' and eight accounts' tags spread over three masters: no one master does it all.
    expect(row!.busiestShare).toBeLessThan(0.9)
    expect(sizingTable([row!], options)).toContain('the market held apart, 6 offers, 8 accounts per replica')
  })

  test.skipIf(physicalCores().length < 2)(
    'with a core kept for the master: paid requests served, and this process given back its cores',
    async () => {
      const own = cpusOf(process.pid)
      const options = { masters: [1], replicas: [1], clients: 4, seconds: 1, warmSeconds: 0, pin: 1 }
      const [row] = await measureSizing(options)
      expect(row!.failed).toBe(0)
      expect(row!.requestsPerSecond).toBeGreaterThan(0)
      expect(row!.busiestShare).toBe(1)
      expect(cpusOf(process.pid)).toEqual(own)
      expect(sizingTable([row!], options)).toContain('each master on a core of its own (1 kept for Redis)')
    },
  )
})
