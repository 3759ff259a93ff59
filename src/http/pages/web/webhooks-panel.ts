// The owner's webhook endpoints on the buyer dashboard and the supplier page (the same routes under
// /v1/agent and /v1/supplier): the list with each endpoint's state, an endpoint registered (its
// signing secret shown this once), disabled, enabled or removed, its secret rotated (the new one
// shown this once; the previous one signing beside it for a day, or ended at once), an endpoint's
// delivery log read (an event dropped while it was disabled shown skipped), and one of its events
// sent again.
import { ACCOUNT_EVENTS, type DeliveryRecord, SUPPLIER_EVENTS } from '../../../webhooks/events.ts'
import { actionButton, byId, fill, h, money, onSubmit, say, table, when } from './common.ts'

type Call = <T>(path: string, method?: string, body?: unknown) => Promise<T>

interface Endpoint {
  id: string
  url: string
  events: string[]
  balanceThresholdUsdc: string | null
  createdAt: string
  /** Why and since when (ms) no event is sent to it; null while enabled. */
  disabled: { reason: string; at: number } | null
  /** Until when (ms) the secrets a rotation replaced still sign beside the current one. */
  previousSecretsSignUntil: number | null
}

/** How long a rotation keeps the previous secret signing: the API's default, or none (a leaked one). */
const ROTATE_OVERLAP_SECONDS = 24 * 60 * 60

/** Wires the webhooks panel of `prefix`'s owner to `call`; returns what redraws it. */
export function webhooksPanel(call: Call, prefix: '/v1/agent' | '/v1/supplier'): () => Promise<void> {
  const path = (id: string) => `${prefix}/webhooks/${encodeURIComponent(id)}`
  const account = prefix === '/v1/agent'
  const types = account ? ACCOUNT_EVENTS : SUPPLIER_EVENTS
  // The section's body, the same on both pages (each page's HTML holds only its heading).
  byId('webhooks-section').append(
    h('div', { id: 'webhooks' }),
    h('p', { id: 'webhooks-status', class: 'status', role: 'status' }),
    h('h3', {}, 'New endpoint'),
    h(
      'form',
      { id: 'webhook-form' },
      h(
        'label',
        {},
        'URL (public https) ',
        h('input', { name: 'url', type: 'url', maxlength: 2048, required: true }),
      ),
      h(
        'fieldset',
        {},
        h('legend', {}, 'Events'),
        ...types.map((type) =>
          h('label', {}, h('input', { type: 'checkbox', name: 'events', value: type }), ` ${type}`),
        ),
      ),
      account &&
        h(
          'label',
          {},
          'Balance threshold (USDC, for balance.low) ',
          h('input', { name: 'balanceThresholdUsdc', inputmode: 'decimal', pattern: '\\d+(\\.\\d{1,6})?' }),
        ),
      h('button', { type: 'submit' }, 'Register endpoint'),
    ),
    h('div', { id: 'webhook-secret' }),
    h(
      'section',
      { id: 'deliveries-section', 'aria-labelledby': 'deliveries-title', hidden: true, 'data-detail': true },
      h('h3', { id: 'deliveries-title' }, 'Delivery log'),
      h('div', { id: 'deliveries' }),
    ),
  )
  const status = byId('webhooks-status')

  async function showDeliveries(endpoint: Endpoint) {
    const { deliveries } = await call<{ deliveries: DeliveryRecord[] }>(`${path(endpoint.id)}/deliveries`)
    const section = byId('deliveries-section')
    section.hidden = false
    fill(byId('deliveries-title'), `Delivery log of ${endpoint.url}`)
    fill(
      byId('deliveries'),
      table(
        'Deliveries, newest first',
        ['Event', 'Type', 'Try', 'Outcome', 'When', 'Replay'],
        deliveries.map((d) => [
          h('code', {}, d.eventId),
          d.type,
          d.skipped ? '–' : d.replay ? 'replay' : d.attempt,
          d.skipped
            ? `skipped: ${d.skipped}`
            : d.ok
              ? `delivered (${d.httpStatus})`
              : `failed: ${d.error ?? d.httpStatus}`,
          when(d.at),
          actionButton('Replay', `Replay ${d.eventId}`, status, async () => {
            const sent = await call<DeliveryRecord>(
              `${path(endpoint.id)}/deliveries/${encodeURIComponent(d.eventId)}/replay`,
              'POST',
            )
            await showDeliveries(endpoint)
            say(
              status,
              sent.ok
                ? `${d.eventId} was sent again and accepted.`
                : `${d.eventId} was sent again: ${sent.error}.`,
            )
          }),
        ]),
        'no deliveries yet',
      ),
    )
  }

  // Enable for a disabled endpoint (one a 410 Gone disabled too), Disable for an enabled one.
  function stateButton(endpoint: Endpoint) {
    const enable = endpoint.disabled !== null
    const verb = enable ? 'Enable' : 'Disable'
    return actionButton(verb, `${verb} ${endpoint.url}`, status, async () => {
      await call(path(endpoint.id), 'PATCH', { disabled: !enable })
      await showWebhooks()
      say(
        status,
        enable
          ? `${endpoint.url} was enabled: the events from now on are sent to it.`
          : `${endpoint.url} was disabled: no event is sent to it until it is enabled.`,
      )
    })
  }

  /** The new secret, shown this once, and what the previous one still signs. */
  function showSecret(text: string, secret: string) {
    fill(
      byId('webhook-secret'),
      h(
        'div',
        { class: 'once', role: 'status' },
        h('p', {}, text),
        h('code', { id: 'webhook-secret-value' }, secret),
      ),
    )
  }

  // Rotate keeps the previous secret signing for a day (the receiver deploys the new one meanwhile);
  // Revoke ends it at once, for a secret that leaked.
  function rotateButton(endpoint: Endpoint, revoke: boolean) {
    const verb = revoke ? 'Revoke' : 'Rotate'
    return actionButton(`${verb} secret`, `${verb} secret of ${endpoint.url}`, status, async () => {
      const ask = revoke
        ? `Revoke the signing secret of ${endpoint.url}? A new one signs from now on; the old one stops at once.`
        : `Rotate the signing secret of ${endpoint.url}? The old one keeps signing beside the new one for a day.`
      if (!confirm(ask)) return
      const rotated = await call<Endpoint & { secret: string }>(
        `${path(endpoint.id)}/rotate-secret`,
        'POST',
        {
          overlapSeconds: revoke ? 0 : ROTATE_OVERLAP_SECONDS,
        },
      )
      const old =
        rotated.previousSecretsSignUntil === null
          ? 'The old one no longer signs.'
          : `The old one also signs each delivery until ${when(rotated.previousSecretsSignUntil)}.`
      showSecret(
        `The new signing secret of ${endpoint.url}, shown this once: copy it now. ${old}`,
        rotated.secret,
      )
      await showWebhooks()
      say(status, `${endpoint.url} has a new signing secret.`)
    })
  }

  async function showWebhooks() {
    const { webhooks } = await call<{ webhooks: Endpoint[] }>(`${prefix}/webhooks`)
    fill(
      byId('webhooks'),
      table(
        'Endpoints',
        ['URL', 'Events', 'Balance threshold', 'Created', 'State', 'Log', 'Sending', 'Secret', 'Remove'],
        webhooks.map((endpoint) => [
          h('code', {}, endpoint.url),
          endpoint.events.join(', '),
          endpoint.balanceThresholdUsdc === null ? '–' : money(endpoint.balanceThresholdUsdc),
          when(endpoint.createdAt),
          endpoint.disabled
            ? `disabled: ${endpoint.disabled.reason}, ${when(endpoint.disabled.at)}`
            : 'enabled',
          actionButton('Delivery log', `Delivery log of ${endpoint.url}`, status, () =>
            showDeliveries(endpoint),
          ),
          stateButton(endpoint),
          h(
            'span',
            {},
            endpoint.previousSecretsSignUntil !== null &&
              h('span', {}, `old one signs until ${when(endpoint.previousSecretsSignUntil)} `),
            rotateButton(endpoint, false),
            ' ',
            rotateButton(endpoint, true),
          ),
          actionButton('Remove', `Remove ${endpoint.url}`, status, async () => {
            if (!confirm(`Remove ${endpoint.url}? No more events are sent to it.`)) return
            await call(path(endpoint.id), 'DELETE')
            byId('deliveries-section').hidden = true
            await showWebhooks()
            say(status, `${endpoint.url} was removed.`)
          }),
        ]),
        'none registered',
      ),
    )
  }

  onSubmit(byId<HTMLFormElement>('webhook-form'), status, async (data) => {
    const threshold = String(data.get('balanceThresholdUsdc') ?? '').trim()
    const created = await call<Endpoint & { secret: string }>(`${prefix}/webhooks`, 'POST', {
      url: String(data.get('url') ?? '').trim(),
      events: data.getAll('events').map(String),
      ...(threshold === '' ? {} : { balanceThresholdUsdc: threshold }),
    })
    showSecret(`The signing secret of ${created.url}, shown this once: copy it now.`, created.secret)
    byId<HTMLFormElement>('webhook-form').reset()
    await showWebhooks()
  })
  return showWebhooks
}
