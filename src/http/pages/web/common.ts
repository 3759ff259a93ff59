// What the three pages share: calls to the gateway's API (a Bearer token, never a cookie), money
// and time formatting in the viewer's locale and zone, and DOM building without innerHTML.

export class ApiFailure extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message)
  }
}

export interface CallOptions {
  token?: string | null
  method?: string
  body?: unknown
  headers?: Record<string, string>
}

/** One API call; a non-2xx answer throws its error's code and message. */
export async function api<T>(path: string, options: CallOptions = {}): Promise<T> {
  const headers: Record<string, string> = { ...options.headers }
  if (options.token) headers.authorization = `Bearer ${options.token}`
  if (options.body !== undefined) headers['content-type'] = 'application/json'
  const response = await fetch(path, {
    method: options.method ?? 'GET',
    headers,
    body: options.body === undefined ? undefined : JSON.stringify(options.body),
    // The key travels as a Bearer header only; the gateway refuses a request carrying a cookie.
    credentials: 'omit',
  })
  const text = await response.text()
  let json: unknown = null
  try {
    json = text ? JSON.parse(text) : null
  } catch {
    json = null
  }
  if (!response.ok) {
    const error = (json as { error?: { code?: string; message?: string } } | null)?.error
    throw new ApiFailure(response.status, error?.code ?? 'error', error?.message ?? `HTTP ${response.status}`)
  }
  return json as T
}

const usd = new Intl.NumberFormat(undefined, {
  style: 'currency',
  currency: 'USD',
  minimumFractionDigits: 2,
  maximumFractionDigits: 6,
})
const plain = new Intl.NumberFormat(undefined, { maximumFractionDigits: 6 })

/** A decimal USDC string as money. */
export const money = (usdc: string | number) => usd.format(Number(usdc))
/** A decimal DIEM string. */
export const diem = (amount: string | number) => `${plain.format(Number(amount))} DIEM`
export const count = (n: number | null | undefined) => (n === null || n === undefined ? '–' : plain.format(n))
/** A time in the viewer's own zone. */
export const when = (iso: string | number | null | undefined) =>
  iso === null || iso === undefined || iso === '' ? '–' : new Date(iso).toLocaleString()
export const cents = (n: number | null | undefined) => (n === null || n === undefined ? '–' : `${n}¢`)

export type Child = Node | string | number | null | undefined | false

/** An element with attributes (`on<event>` functions become listeners) and children. */
export function h(tag: string, props: Record<string, unknown> = {}, ...children: Child[]): HTMLElement {
  const element = document.createElement(tag)
  for (const [name, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue
    if (name.startsWith('on') && typeof value === 'function') {
      element.addEventListener(name.slice(2), value as EventListener)
    } else {
      element.setAttribute(name, value === true ? '' : String(value))
    }
  }
  append(element, children)
  return element
}

function append(parent: Element, children: Child[]) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue
    parent.append(child instanceof Node ? child : String(child))
  }
}

/** Replaces what `parent` shows. */
export function fill(parent: Element, ...children: Child[]) {
  parent.replaceChildren()
  append(parent, children)
}

export function byId<T extends HTMLElement = HTMLElement>(id: string): T {
  const element = document.getElementById(id)
  if (!element) throw new Error(`#${id} is missing`)
  return element as T
}

/** A table with a caption and column headers, in a box that scrolls sideways on a narrow screen. */
export function table(
  caption: string,
  headers: string[],
  rows: Child[][],
  empty = 'Nothing yet.',
): HTMLElement {
  if (rows.length === 0) return h('p', { class: 'empty' }, `${caption}: ${empty}`)
  return h(
    'div',
    { class: 'scroll', role: 'region', 'aria-label': caption, tabindex: 0 },
    h(
      'table',
      {},
      h('caption', {}, caption),
      h('thead', {}, h('tr', {}, ...headers.map((name) => h('th', { scope: 'col' }, name)))),
      h('tbody', {}, ...rows.map((cells) => h('tr', {}, ...cells.map((cell) => h('td', {}, cell))))),
    ),
  )
}

/** A definition list of label -> value. */
export function facts(pairs: [string, Child][]): HTMLElement {
  return h(
    'dl',
    { class: 'facts' },
    ...pairs.flatMap(([term, value]) => [h('dt', {}, term), h('dd', {}, value)]),
  )
}

/** Says something in the page's status line: `alert` for failures, read out at once. */
export function say(target: Element, message: string, kind: 'status' | 'alert' = 'status') {
  target.setAttribute('role', kind)
  target.textContent = message
}

/** Runs a form's action on submit (Enter or its button), reporting a failure beside it. */
export function onSubmit(form: HTMLFormElement, status: Element, action: (data: FormData) => Promise<void>) {
  form.addEventListener('submit', async (event) => {
    event.preventDefault()
    const button = form.querySelector<HTMLButtonElement>('button[type=submit]')
    if (button) button.disabled = true
    try {
      await action(new FormData(form))
    } catch (error) {
      say(status, failure(error), 'alert')
    } finally {
      if (button) button.disabled = false
    }
  })
}

/** A button (`text` shown, `name` for assistive technology) running `action`; a failure is said in `status`. */
export function actionButton(text: string, name: string, status: Element, action: () => Promise<void>) {
  const button = h(
    'button',
    { type: 'button', class: 'quiet', 'aria-label': name },
    text,
  ) as HTMLButtonElement
  button.addEventListener('click', async () => {
    button.disabled = true
    try {
      await action()
    } catch (error) {
      say(status, failure(error), 'alert')
    } finally {
      button.disabled = false
    }
  })
  return button
}

export function failure(error: unknown): string {
  if (error instanceof ApiFailure) return `${error.message} (${error.code})`
  return error instanceof Error ? error.message : String(error)
}

/** A token kept for this tab only: sessionStorage, never a cookie or localStorage. */
export function tabSecret(name: string) {
  return {
    get: () => sessionStorage.getItem(name),
    set: (value: string) => sessionStorage.setItem(name, value),
    clear: () => sessionStorage.removeItem(name),
  }
}

/** The transaction link of the configured network's explorer, or the plain hash when there is none. */
export function txLink(hash: string | null | undefined): Child {
  if (!hash) return '–'
  const base = document.querySelector('meta[name="svc-explorer-tx"]')?.getAttribute('content')
  const short = `${hash.slice(0, 10)}…${hash.slice(-6)}`
  if (!base) return h('code', { title: hash }, hash)
  return h('a', { href: `${base}${hash}`, rel: 'noopener noreferrer', target: '_blank', title: hash }, short)
}
