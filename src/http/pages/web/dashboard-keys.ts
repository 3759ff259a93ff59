// The buyer's API keys on the dashboard: the list with each key's limit, spend and what is left,
// a limit changed or a key revoked in place, and a new key minted (its plaintext shown this once).
import { actionButton, byId, fill, h, money, onSubmit, say, table, when } from './common.ts'

type Call = <T>(path: string, method?: string, body?: unknown) => Promise<T>

interface Key {
  id: string
  name: string
  keyPrefix: string
  createdAt: string
  lastUsedAt: string | null
  limitUsdc: string | null
  spentUsdc: string
  limitRemainingUsdc: string | null
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
      h('button', { type: 'submit', class: 'quiet' }, `Set limit of ${k.name}`),
    ) as HTMLFormElement
    onSubmit(limitForm, byId('keys-status'), async (data) => {
      const raw = String(data.get('limitUsdc') ?? '').trim()
      await call(`/v1/agent/keys/${encodeURIComponent(k.id)}`, 'PATCH', {
        limitUsdc: raw === '' ? null : raw,
      })
      await showKeys()
      say(byId('keys-status'), `The limit of ${k.name} is now ${raw === '' ? 'none' : money(raw)}.`)
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
      k.limitUsdc === null ? 'none' : money(k.limitUsdc),
      money(k.spentUsdc),
      k.limitRemainingUsdc === null ? '–' : money(k.limitRemainingUsdc),
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
        ['Name', 'Prefix', 'Limit', 'Spent', 'Left', 'Last used', 'Change limit', 'Revoke'],
        keys.activeApiKeys.map(keyRow),
      ),
    )
  }

  onSubmit(byId<HTMLFormElement>('mint-form'), byId('keys-status'), async (data) => {
    const limit = String(data.get('limitUsdc') ?? '').trim()
    const minted = await call<{ apiKey: string; name: string }>('/v1/agent/keys', 'POST', {
      name: String(data.get('name') ?? '').trim(),
      ...(limit === '' ? {} : { limitUsdc: limit }),
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
