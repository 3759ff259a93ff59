// The one interval of a ticking set: started by the first member, kept across members that come and
// go one after another, stopped by the visit that finds the set empty.
import { expect, test } from 'bun:test'
import type { Every } from '../../src/timing/every.ts'
import { TickingSet } from '../../src/timing/ticking-set.ts'

/** A driver the test turns by hand: how many intervals were started and are running now. */
function handDriven() {
  const running = new Set<() => unknown>()
  let started = 0
  const every: Every = (_periodMs, run) => {
    started += 1
    running.add(run)
    return () => running.delete(run)
  }
  return {
    every,
    started: () => started,
    running: () => running.size,
    tick: () => {
      for (const run of [...running]) run()
    },
  }
}

test('members added and removed one after another share one interval, stopped once a visit finds none', () => {
  const driver = handDriven()
  const visited: string[] = []
  const set = new TickingSet<string>(100, (member) => visited.push(member), driver.every)
  for (const member of ['a', 'b', 'c']) {
    set.add(member)
    set.remove(member)
  }
  expect(driver.started()).toBe(1)
  set.add('d')
  driver.tick()
  expect(visited).toEqual(['d'])
  set.remove('d')
  expect(driver.running()).toBe(1)
  driver.tick() // finds the set empty: the interval stops
  expect(visited).toEqual(['d'])
  expect(driver.running()).toBe(0)
  set.add('e')
  expect(driver.started()).toBe(2)
  driver.tick()
  expect(visited).toEqual(['d', 'e'])
})
