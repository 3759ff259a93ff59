// Function libraries for the prune tests: tiny stand-ins for other versions' and other apps'.
import type { Commands } from '../../src/redis/store.ts'

/** A valid library registering one function, `<name>_ping`, that answers its own name. */
export function tinyLibrary(name: string): string {
  return `#!lua name=${name}\nredis.register_function('${name}_ping', function() return '${name}' end)`
}

/** The names of every library Redis has, sorted. */
export async function libraryNames(store: Commands): Promise<string[]> {
  const list = (await store.call('FUNCTION', 'LIST')) as unknown[][]
  return list.map((entry) => String(entry[1])).sort()
}
