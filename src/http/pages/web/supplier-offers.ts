// The supplier's offers: each one's ask, capacity and earnings with its ask and capacity changed in
// place, paused or resumed, and a new offer posted on the operator's upstream with the supplier's key.
import { actionButton, byId, cents, count, diem, fill, h, money, onSubmit, say, table } from './common.ts'

type Call = <T>(path: string, method?: string, body?: unknown) => Promise<T>

interface Offer {
  id: string
  askCents: number
  status: string
  capacityDiem: string
  burnedDiem: string
  heldDiem: string
  inFlight: number
  maxInFlight: number
  earnedUsdc: string
}

/** Wires the offers panel to `call`; returns what redraws it. */
export function offersPanel(call: Call, changed: () => Promise<void>): () => Promise<void> {
  const status = byId('offers-status')
  const path = (id: string) => `/v1/supplier/offers/${encodeURIComponent(id)}`

  function changeForm(o: Offer) {
    const form = h(
      'form',
      { 'aria-label': `Change offer ${o.id}` },
      h('label', { class: 'visually-hidden', for: `ask-${o.id}` }, `Ask of ${o.id}`),
      h('input', {
        id: `ask-${o.id}`,
        name: 'askCents',
        type: 'number',
        min: 30,
        max: 80,
        value: o.askCents,
      }),
      h('label', { class: 'visually-hidden', for: `capacity-${o.id}` }, `Capacity of ${o.id}`),
      h('input', {
        id: `capacity-${o.id}`,
        name: 'capacityDiem',
        inputmode: 'decimal',
        value: Number(o.capacityDiem),
      }),
      h('button', { type: 'submit', class: 'quiet' }, 'Save'),
    ) as HTMLFormElement
    onSubmit(form, status, async (data) => {
      await call(path(o.id), 'PATCH', {
        askCents: Number(data.get('askCents')),
        capacityDiem: String(data.get('capacityDiem') ?? '').trim(),
      })
      await show()
      await changed()
      say(status, `Offer ${o.id} saved.`)
    })
    return form
  }

  function pauseButton(o: Offer) {
    const next = o.status === 'active' ? 'paused' : 'active'
    const verb = next === 'paused' ? 'Pause' : 'Resume'
    return actionButton(verb, `${verb} offer ${o.id}`, status, async () => {
      await call(path(o.id), 'PATCH', { status: next })
      await show()
      say(status, `Offer ${o.id} is now ${next}.`)
    })
  }

  async function show() {
    const offers = (await call<{ data: Offer[] }>('/v1/supplier/offers')).data
    fill(
      byId('offers'),
      table(
        'Your offers',
        ['Offer', 'Ask', 'Status', 'Capacity', 'Burned', 'Held', 'In flight', 'Earned', 'Change', 'Pause'],
        offers.map((o) => [
          h('code', {}, o.id),
          cents(o.askCents),
          o.status,
          diem(o.capacityDiem),
          diem(o.burnedDiem),
          diem(o.heldDiem),
          `${count(o.inFlight)} / ${count(o.maxInFlight)}`,
          money(o.earnedUsdc),
          changeForm(o),
          pauseButton(o),
        ]),
        'no offers yet',
      ),
    )
  }

  onSubmit(byId<HTMLFormElement>('offer-form'), status, async (data) => {
    const maxInFlight = String(data.get('maxInFlight') ?? '').trim()
    const offer = await call<Offer>('/v1/supplier/offers', 'POST', {
      upstreamApiKey: String(data.get('upstreamApiKey') ?? ''),
      askCents: Number(data.get('askCents')),
      capacityDiem: String(data.get('capacityDiem') ?? '').trim(),
      ...(maxInFlight === '' ? {} : { maxInFlight: Number(maxInFlight) }),
    })
    byId<HTMLFormElement>('offer-form').reset()
    await show()
    await changed()
    say(status, `Offer ${offer.id} posted at ${cents(offer.askCents)}.`)
  })
  return show
}
