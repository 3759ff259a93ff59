// The buyer's API keys on the dashboard: the list with each key's limit (for its lifetime, or per
// day, week or month), spend (in the current period too, and when it resets) and what is left, a
// limit or its reset changed or a key revoked in place, and a new key minted (its plaintext shown
// this once).
import { actionButton, byId, fill, h, money, onSubmit, say, table, when } from './common.ts'

type Call = <T>(path: string, method?: string, body?: unknown) => Promise<T>

interface Key {
  id: string
  name: string
  keyPrefix: string
  createdAt: string
  lastUsedAt: string | null
  limitUsdc: string | null
  limitReset: 'daily' | 'weekly' | 'monthly' | null
  spentUsdc: string
  periodSpentUsdc: string | null
  limitResetsAt: string | null
  limitRemainingUsdc: string | null
}

const PER = { daily: 'a day', weekly: 'a week', monthly: 'a month' } as const
const RESETS = [
  ['', 'never'],
  ['daily', 'daily'],
  ['weekly', 'weekly'],
  ['monthly', 'monthly'],
] as const

/** A limit as words: "$5.00", "$5.00 a day", or "none". */
function limitText(limitUsdc: string | null, reset: Key['limitReset']): string {
  if (limitUsdc === null) return 'none'
  return reset === null ? money(limitUsdc) : `${money(limitUsdc)} ${PER[reset]}`
}

/** Wires the keys panel to `call` (the signed-in key's API calls); returns what redraws it. */
export function keysPanel(call: Call): () => Promise<void> {
  function keyRow(k: Key) {
    const limitForm = h(
      'form',
      { 'aria-label': `Limit of ${k.name}` },
      h(
        'label',
        { class: 'visually-hidden', for: `limit-${k.id}` },
        `New limit for ${k.name} (USDC, empty for none)`,
      ),
      h('input', {
        id: `limit-${k.id}`,
        name: 'limitUsdc',
        inputmode: 'decimal',
        value: k.limitUsdc ?? '',
        pattern: '\\d+(\\.\\d{1,6})?',
      }),
      h('label', { class: 'visually-hidden', for: `reset-${k.id}` }, `Limit of ${k.name} resets`),
      h(
        'select',
        { id: `reset-${k.id}`, name: 'limitReset' },
        ...RESETS.map(([value, label]) =>
          h('option', { value, selected: (k.limitReset ?? '') === value }, label),
        ),
      ),
      h('button', { type: 'submit', class: 'quiet' }, `Set limit of ${k.name}`),
    ) as HTMLFormElement
    onSubmit(limitForm, byId('keys-status'), async (data) => {
      const raw = String(data.get('limitUsdc') ?? '').trim()
      const reset = String(data.get('limitReset') ?? '') as NonNullable<Key['limitReset']> | ''
      // No limit takes its reset with it; a limit sends its reset, none for a lifetime one.
      const updated = await call<Key>(
        `/v1/agent/keys/${encodeURIComponent(k.id)}`,
        'PATCH',
        raw === '' ? { limitUsdc: null } : { limitUsdc: raw, limitReset: reset === '' ? null : reset },
      )
      await showKeys()
      say(
        byId('keys-status'),
        `The limit of ${k.name} is now ${limitText(updated.limitUsdc, updated.limitReset)}.`,
      )
    })
    const revoke = actionButton(`Revoke ${k.name}`, `Revoke ${k.name}`, byId('keys-status'), async () => {
      if (!confirm(`Revoke ${k.name}? Requests with it stop at once.`)) return
      await call(`/v1/agent/keys/${encodeURIComponent(k.id)}`, 'DELETE')
      await showKeys()
      say(byId('keys-status'), `${k.name} was revoked.`)
    })
    return [
      k.name,
      h('code', {}, `${k.keyPrefix}…`),
      limitText(k.limitUsdc, k.limitReset),
      money(k.spentUsdc),
      k.periodSpentUsdc === null ? '–' : money(k.periodSpentUsdc),
      k.limitRemainingUsdc === null ? '–' : money(k.limitRemainingUsdc),
      when(k.limitResetsAt),
      when(k.lastUsedAt),
      limitForm,
      revoke,
    ]
  }

  async function showKeys() {
    const keys = await call<{ activeApiKeys: Key[] }>('/v1/agent/keys')
    fill(
      byId('keys'),
      table(
        'Active keys',
        [
          'Name',
          'Prefix',
          'Limit',
          'Spent',
          'Spent this period',
          'Left',
          'Resets',
          'Last used',
          'Change limit',
          'Revoke',
        ],
        keys.activeApiKeys.map(keyRow),
      ),
    )
  }

  onSubmit(byId<HTMLFormElement>('mint-form'), byId('keys-status'), async (data) => {
    const limit = String(data.get('limitUsdc') ?? '').trim()
    const reset = String(data.get('limitReset') ?? '')
    const minted = await call<{ apiKey: string; name: string }>('/v1/agent/keys', 'POST', {
      name: String(data.get('name') ?? '').trim(),
      ...(limit === '' ? {} : { limitUsdc: limit }),
      ...(reset === '' ? {} : { limitReset: reset }),
    })
    fill(
      byId('minted'),
      h(
        'div',
        { class: 'once', role: 'status' },
        h('p', {}, `Your new key ${minted.name}, shown this once: copy it now.`),
        h('code', { id: 'minted-key' }, minted.apiKey),
      ),
    )
    byId<HTMLFormElement>('mint-form').reset()
    await showKeys()
  })
  return showKeys
}
