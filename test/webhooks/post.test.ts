// A delivery connects to the address it checked: the resolver is the address policy's, injected
// here. A name that answers a public address at check time and loopback after never reaches the
// loopback receiver (nothing resolves it twice); over http the URL's host rides in the Host
// header; over https in TLS SNI, with the certificate verified for that name. A redirect is a
// failed try, never followed; an answer is read no further than its bound; a name server that
// never answers ends the try at its timeout (and a registration with a 400).
import { afterAll, describe, expect, test } from 'bun:test'
import { join } from 'node:path'
import { resolvePublicAddress } from '../../src/webhooks/address-check.ts'
import { postEvent } from '../../src/webhooks/post.ts'
import { selfSignedCert } from '../helpers/tls.ts'

const servers: { stop(force: boolean): unknown }[] = []
afterAll(() => {
  for (const server of servers) server.stop(true)
})

/** A loopback receiver that keeps the Host header of every request it got. */
function hostsReceiver(tls?: { cert: string; key: string }) {
  const hosts: string[] = []
  const server = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    ...(tls ? { tls } : {}),
    fetch(request) {
      hosts.push(request.headers.get('host') ?? '')
      return new Response('ok')
    },
  })
  servers.push(server)
  return { port: server.port, hosts }
}

/** A resolver that answers `answers` in turn (the last one from then on), counting its calls. */
function scriptedResolver(...answers: string[][]) {
  const calls: string[] = []
  return {
    calls,
    resolve: async (host: string) => {
      calls.push(host)
      return answers[Math.min(calls.length, answers.length) - 1] as string[]
    },
  }
}

/** A name server that answers (loopback) only long past the test's own limit. */
const silentResolver = () =>
  new Promise<string[]>((resolve) => setTimeout(() => resolve(['127.0.0.1']), 20_000).unref())

describe('postEvent', () => {
  test('DNS that moves to loopback after the check is not followed: nothing reaches loopback', async () => {
    const receiver = hostsReceiver()
    // Public (TEST-NET-1, routed nowhere) when checked, loopback on any later lookup; `localhost`
    // is what the system's own resolver sends to loopback, were the name resolved again.
    const dns = scriptedResolver(['192.0.2.1'], ['127.0.0.1'])
    const outcome = await postEvent(
      `http://localhost:${receiver.port}/hook`,
      {},
      '{}',
      { allowLoopback: false, resolve: dns.resolve },
      300,
    )
    expect(outcome.ok).toBe(false)
    expect(outcome.httpStatus).toBeNull()
    expect(dns.calls).toEqual(['localhost'])
    expect(receiver.hosts).toEqual([])
  })

  test('an address that is not public at check time is refused before any connection', async () => {
    const receiver = hostsReceiver()
    const dns = scriptedResolver(['127.0.0.1'])
    const outcome = await postEvent(
      `http://hook.example:${receiver.port}/hook`,
      {},
      '{}',
      { allowLoopback: false, resolve: dns.resolve },
      300,
    )
    expect(outcome).toMatchObject({ ok: false, httpStatus: null })
    expect(outcome.error).toContain('public addresses only')
    expect(receiver.hosts).toEqual([])
  })

  test('a name server that never answers ends the try at its timeout, before any connection', async () => {
    const receiver = hostsReceiver()
    const outcome = await postEvent(
      `http://hook.example:${receiver.port}/hook`,
      {},
      '{}',
      { allowLoopback: true, resolve: silentResolver },
      300,
    )
    expect(outcome).toEqual({
      ok: false,
      httpStatus: null,
      error: 'url host hook.example did not resolve in time',
    })
    expect(receiver.hosts).toEqual([])
  }, 10_000)

  test('registration: a name server that never answers is a 400 once the webhook timeout passes', async () => {
    const refused = resolvePublicAddress(new URL('https://hook.example/hook'), {
      allowLoopback: false,
      resolve: silentResolver,
      timeoutMs: 300,
    })
    await expect(refused).rejects.toMatchObject({ status: 400, code: 'invalid_webhook_url' })
  }, 10_000)

  test('a redirect is not followed: the try fails, and where it points is never asked', async () => {
    const target = hostsReceiver()
    const redirecting = Bun.serve({
      port: 0,
      hostname: '127.0.0.1',
      fetch: () =>
        new Response(null, { status: 307, headers: { location: `http://127.0.0.1:${target.port}/hook` } }),
    })
    servers.push(redirecting)
    const outcome = await postEvent(
      `http://127.0.0.1:${redirecting.port}/hook`,
      {},
      '{}',
      { allowLoopback: true },
      2_000,
    )
    expect(outcome).toEqual({ ok: false, httpStatus: 307, error: 'redirect not followed' })
    expect(target.hosts).toEqual([])
  })

  test('an answer that never ends is read no further than its bound: the try ends without it', async () => {
    // 64 KiB at once, then an open body that never closes: a reader that wanted all of it would
    // wait for the minute-long timeout below, past the test's own limit.
    const endless = Bun.serve({
      port: 0,
      hostname: '127.0.0.1',
      fetch: () =>
        new Response(
          new ReadableStream({
            start(controller) {
              controller.enqueue(new Uint8Array(65_536))
            },
          }),
          { status: 200 },
        ),
    })
    servers.push(endless)
    const outcome = await postEvent(
      `http://127.0.0.1:${endless.port}/hook`,
      {},
      '{}',
      { allowLoopback: true },
      60_000,
    )
    expect(outcome).toEqual({ ok: true, httpStatus: 200, error: null })
  })

  test('http: connects to the checked address with the URL host in the Host header', async () => {
    const receiver = hostsReceiver()
    // hook.example resolves nowhere but by the injected resolver: only the checked address works.
    const dns = scriptedResolver(['127.0.0.1'])
    const outcome = await postEvent(
      `http://hook.example:${receiver.port}/hook`,
      {},
      '{}',
      { allowLoopback: true, resolve: dns.resolve },
      2_000,
    )
    expect(outcome).toEqual({ ok: true, httpStatus: 200, error: null })
    expect(dns.calls).toEqual(['hook.example'])
    expect(receiver.hosts).toEqual([`hook.example:${receiver.port}`])
  })

  test('https: connects to the checked address with SNI and the certificate verified for the name', async () => {
    const cert = selfSignedCert('hook.example')
    try {
      const receiver = hostsReceiver(cert.tls())
      // A child process that trusts the certificate (NODE_EXTRA_CA_CERTS is read at start).
      const script = `
        import { postEvent } from ${JSON.stringify(join(import.meta.dir, '../../src/webhooks/post.ts'))}
        const policy = { allowLoopback: true, resolve: async () => ['127.0.0.1'] }
        const out = {}
        for (const host of ['hook.example', 'other.example'])
          out[host] = await postEvent('https://' + host + ':' + ${receiver.port} + '/hook', {}, '{}', policy, 5000)
        console.log(JSON.stringify(out))
      `
      const child = Bun.spawn([process.execPath, '-e', script], {
        env: { ...process.env, NODE_EXTRA_CA_CERTS: cert.certPath },
        stdout: 'pipe',
        stderr: 'pipe',
      })
      const [stdout, stderr, code] = await Promise.all([
        new Response(child.stdout).text(),
        new Response(child.stderr).text(),
        child.exited,
      ])
      expect({ code, stderr: code === 0 ? '' : stderr }).toEqual({ code: 0, stderr: '' })
      const out = JSON.parse(stdout.trim().split('\n').at(-1)!)
      expect(out['hook.example']).toEqual({ ok: true, httpStatus: 200, error: null })
      // The same address, a name the certificate does not carry: refused before any request.
      expect(out['other.example']).toMatchObject({ ok: false, httpStatus: null })
      expect(receiver.hosts).toEqual([`hook.example:${receiver.port}`])
    } finally {
      cert.remove()
    }
  }, 20_000)
})
