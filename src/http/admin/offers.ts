// Operator routes for offers under /admin/v1/offers (a fixed interface: scripts drive it), behind
// the admin token. The upstream key goes in on create or update and never comes out.
import { Elysia, t } from 'elysia'
import { shownText } from '../../accounts/key-name.ts'
import { badRequest, notFound } from '../../errors.ts'
import {
  ASK_MAX_CENTS,
  ASK_MIN_CENTS,
  MAX_CAPACITY_MICRO_DIEM,
  MAX_SUPPLIER_LABEL_CHARS,
  MAX_UPSTREAM_KEY_CHARS,
  type OfferInput,
  OfferService,
} from '../../market/offers.ts'
import { formatMicros, type MicroDiem, parseMicros } from '../../money/units.ts'
import type { Keyspace } from '../../redis/keys.ts'
import type { Store } from '../../redis/store.ts'
import { adminAuth } from '../auth.ts'

export const offerFields = {
  upstreamBaseUrl: t.String({ minLength: 1, maxLength: 2048 }),
  // A key travels as a Bearer token: visible ASCII only, so nothing an owner sends can break the
  // request line it rides on, or fail every request routed to the offer.
  upstreamApiKey: t.String({ minLength: 1, maxLength: MAX_UPSTREAM_KEY_CHARS, pattern: '^[\\x21-\\x7E]+$' }),
  // t.Number, not t.Integer: Elysia's Integer coerces strings, and an ask sent as "40" is a client bug.
  askCents: t.Number({ multipleOf: 1, minimum: ASK_MIN_CENTS, maximum: ASK_MAX_CENTS }),
  capacityDiem: t.Union([t.String({ maxLength: 32 }), t.Number()]),
  maxInFlight: t.Number({ multipleOf: 1, minimum: 1, maximum: 100_000 }),
  // Shown in pages and logs; at most MAX_SUPPLIER_LABEL_CHARS UTF-16 units too, as the CLI counts.
  supplier: shownText(MAX_SUPPLIER_LABEL_CHARS, 1, { maxLength: MAX_SUPPLIER_LABEL_CHARS }),
}

/** What an offer's owner (an operator or its supplier) may change on it, each optional. */
export const offerChanges = {
  askCents: t.Optional(offerFields.askCents),
  capacityDiem: t.Optional(offerFields.capacityDiem),
  status: t.Optional(t.Union([t.Literal('active'), t.Literal('paused')])),
}

/** A PATCH body of `fields`: nothing else, and at least one of them. */
export const patchBody = <F extends Parameters<typeof t.Object>[0]>(fields: F) =>
  t.Object(fields, { additionalProperties: false, minProperties: 1 })

function baseUrl(raw: string): string {
  try {
    const url = new URL(raw)
    if (url.protocol === 'http:' || url.protocol === 'https:') return raw.replace(/\/+$/, '')
  } catch {}
  throw badRequest('upstreamBaseUrl must be an http:// or https:// URL', 'invalid_upstream_url')
}

/**
 * A posted capacity; `min` (micro-DIEM): the least a supplier may post, since an offer with less
 * left stands aside (SVC_MIN_ROUTABLE_MICRO_DIEM).
 */
export function capacity(raw: string | number, min = 0): MicroDiem {
  const micros = parseMicros(raw)
  if (micros === null || micros <= 0 || micros > MAX_CAPACITY_MICRO_DIEM) {
    throw badRequest(
      'capacityDiem must be a positive DIEM amount with at most 6 decimals, up to 1000000',
      'invalid_capacity',
    )
  }
  if (micros < min) {
    throw badRequest(
      `capacityDiem must be at least ${formatMicros(min)} DIEM: an offer with less left is not routed`,
      'invalid_capacity',
    )
  }
  return micros as MicroDiem
}

function input(body: {
  upstreamBaseUrl?: string
  upstreamApiKey?: string
  askCents?: number
  capacityDiem?: string | number
  maxInFlight?: number
  supplier?: string
  status?: 'active' | 'paused'
}): OfferInput {
  const out: OfferInput = {}
  if (body.upstreamBaseUrl !== undefined) out.upstreamBaseUrl = baseUrl(body.upstreamBaseUrl)
  if (body.upstreamApiKey !== undefined) out.upstreamApiKey = body.upstreamApiKey
  if (body.askCents !== undefined) out.askCents = body.askCents
  if (body.capacityDiem !== undefined) out.capacity = capacity(body.capacityDiem)
  if (body.maxInFlight !== undefined) out.maxInFlight = body.maxInFlight
  if (body.supplier !== undefined) out.supplier = body.supplier
  if (body.status !== undefined) out.status = body.status
  return out
}

export function adminOfferRoutes(deps: {
  store: Store
  keys: Keyspace
  config: { adminToken: string; masterKey: Uint8Array }
}) {
  const offers = new OfferService(deps.store, deps.keys, deps.config.masterKey)
  const params = t.Object({ id: t.String({ maxLength: 64 }) })
  return new Elysia({ name: 'svc/admin-offers', prefix: '/admin/v1/offers', seed: deps.keys.prefix })
    .use(adminAuth(deps.config.adminToken))
    .post(
      '/',
      async ({ body, status, request, set }) => {
        const fields = {
          ...input(body),
          upstreamBaseUrl: baseUrl(body.upstreamBaseUrl),
          upstreamApiKey: body.upstreamApiKey,
          askCents: body.askCents,
          capacity: capacity(body.capacityDiem),
        }
        // Optional: with it, a create retried after a lost answer answers the same offer.
        const key = request.headers.get('idempotency-key')
        if (key === null) return status(201, await offers.create(fields))
        const { offer, replayed } = await offers.createOnce(fields, key)
        if (replayed) set.headers['idempotent-replayed'] = 'true'
        return status(201, offer)
      },
      {
        admin: true,
        body: t.Object(
          {
            upstreamBaseUrl: offerFields.upstreamBaseUrl,
            upstreamApiKey: offerFields.upstreamApiKey,
            askCents: offerFields.askCents,
            capacityDiem: offerFields.capacityDiem,
            maxInFlight: t.Optional(offerFields.maxInFlight),
            supplier: t.Optional(offerFields.supplier),
            status: t.Optional(t.Union([t.Literal('active'), t.Literal('paused')])),
          },
          { additionalProperties: false },
        ),
      },
    )
    .get('/', async () => ({ object: 'list' as const, data: await offers.list() }), { admin: true })
    .get(
      '/:id',
      async ({ params }) => {
        const offer = await offers.get(params.id)
        if (!offer) throw notFound(`offer '${params.id}' not found`, 'offer_not_found')
        return offer
      },
      { admin: true, params },
    )
    .patch('/:id', async ({ params, body }) => offers.update(params.id, input(body)), {
      admin: true,
      params,
      body: patchBody({
        ...offerChanges,
        upstreamBaseUrl: t.Optional(offerFields.upstreamBaseUrl),
        upstreamApiKey: t.Optional(offerFields.upstreamApiKey),
        maxInFlight: t.Optional(offerFields.maxInFlight),
        supplier: t.Optional(offerFields.supplier),
      }),
    })
    .delete(
      '/:id',
      async ({ params }) => {
        await offers.remove(params.id)
        return { status: 'ok' as const }
      },
      { admin: true, params },
    )
}
