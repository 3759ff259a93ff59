// A query parameter the contract declares as one value (limit, window, maxPriceCents ...) given
// twice is a 400 naming it, on every route that declares one: Elysia would hand the route the last
// of them, silently. The contract's own table says which parameters a route reads, so a route's
// documentation and what it refuses cannot drift apart; a list (lifecycle[]) may repeat, and a
// name the route does not read is ignored, given once or many times.
import { badRequest } from '../errors.ts'
import { openApiPath } from './contract/openapi.ts'
import { OPERATIONS } from './contract/operations.ts'

const scalars = new Map<string, string[]>()
for (const [key, operation] of Object.entries(OPERATIONS)) {
  const names = (operation.parameters ?? [])
    .filter((p) => p.in === 'query' && (p.schema as { type?: string } | undefined)?.type !== 'array')
    .map((p) => p.name as string)
  if (names.length > 0) scalars.set(key, names)
}

/** Throws the 400 for a one-value parameter of this route given more than once. */
export function refuseRepeatedQuery(request: Request, route: string): void {
  const mark = request.url.indexOf('?')
  if (mark < 0) return
  const names = scalars.get(`${request.method} ${openApiPath(route)}`)
  if (!names) return
  const query = new URLSearchParams(request.url.slice(mark + 1))
  for (const name of names) {
    if (query.getAll(name).length > 1)
      throw badRequest(`query parameter '${name}' was given more than once; send it once`)
  }
}
