// Bun gives a request whose Host header is no host name (a space in it, say) a URL of its path
// alone. Whatever reads a request's origin parses its URL, so such a request is refused first, in
// the contract's shape; an error's own answer reads the path whatever the Host.
import { badRequest } from '../errors.ts'

export function checkRequestUrl(request: Request): void {
  if (!URL.canParse(request.url)) throw badRequest('the Host header is not a valid host', 'invalid_request')
}

/** The request's path, whatever its Host header. */
export const requestPath = (request: Request): string => new URL(request.url, 'http://host.invalid').pathname
