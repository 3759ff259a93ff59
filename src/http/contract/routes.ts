// The machine-readable contract on the API host: GET /openapi.json and GET /llms.txt. Both name
// the base address the caller reached, so they are right behind any proxy that keeps the host.
import { type AnyElysia, Elysia } from 'elysia'
import { llmsGuide } from './llms.ts'
import type { openApiDocument } from './openapi.ts'

/** `funded`: the x402 routes are served, so /llms.txt sends agents to sign up by payment. */
export function contractRoutes(app: AnyElysia, funded: boolean) {
  // Built on first use: by then every route of the app is registered, and none is added later. Its
  // generator (@elysiajs/openapi) is loaded then too, not with every process that serves the app.
  let document: Promise<ReturnType<typeof openApiDocument>> | undefined
  return new Elysia({ name: 'svc/contract' })
    .get('/openapi.json', async ({ request }) => {
      // A build that failed is not kept: the next request tries again.
      document ??= import('./openapi.ts')
        .then(({ openApiDocument }) => openApiDocument(app))
        .catch((error) => {
          document = undefined
          throw error
        })
      return { ...(await document), servers: [{ url: new URL(request.url).origin }] }
    })
    .get(
      '/llms.txt',
      ({ request }) =>
        new Response(llmsGuide(new URL(request.url).origin, funded), {
          headers: { 'content-type': 'text/plain; charset=utf-8' },
        }),
    )
}
