// The order a host's checked addresses are tried in: families alternating, as Happy Eyeballs
// (RFC 8305) orders them, so a family this host cannot reach costs one failed connection, not all.
import { isIP } from 'node:net'

/** The addresses, families alternating, each family in the resolver's order, its first family first. */
export function interleaved(addresses: string[]): string[] {
  const first = isIP(addresses[0] ?? '')
  const same = addresses.filter((ip) => isIP(ip) === first)
  const other = addresses.filter((ip) => isIP(ip) !== first)
  const out: string[] = []
  for (let i = 0; i < Math.max(same.length, other.length); i++) {
    if (i < same.length) out.push(same[i] as string)
    if (i < other.length) out.push(other[i] as string)
  }
  return out
}
