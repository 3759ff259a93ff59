// A route's own Response, sent as it is. When a route returns a Response while its `set` carries
// headers (every route's does: the request id, from onRequest), Elysia copies it into a new one,
// its body read back through a stream and its headers merged: per request, a second Response,
// Headers and a ReadableStream. The route takes those headers into its own Response instead.

/** The part of Elysia's `set` a route hands over. */
export interface SetHeaders {
  headers: Record<string, string | number>
}

export function ownResponse(
  set: SetHeaders,
  body: ConstructorParameters<typeof Response>[0],
  headers: Record<string, string>,
): Response {
  for (const name in set.headers) {
    headers[name] ??= String(set.headers[name])
    delete set.headers[name]
  }
  return new Response(body, { headers })
}
