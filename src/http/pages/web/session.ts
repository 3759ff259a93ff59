// Signing in on a page: a token in this tab's sessionStorage, the sign-in part shown until it is
// there, the page's own part after; a token already in the tab (a reload) signs in at once.
import { eraseCharts } from './charts.ts'
import { byId, onSubmit, say, type tabSecret } from './common.ts'

type Secret = ReturnType<typeof tabSecret>

/** Shows the page's own part (`content`) when signed in, the sign-in part otherwise. */
export function showSignedIn(content: string, on: boolean) {
  byId('signin').hidden = on
  byId(content).hidden = !on
}

/**
 * Empties the signed-in part on a sign-out: hidden is not gone, and what it held (a key or secret
 * shown once, an opened record, an upstream key typed and not posted, the figures) would show to
 * whoever signs in next in this tab. Every panel is drawn again at the next sign-in; a part marked
 * `data-detail` (one item opened) stays hidden until it is opened again.
 */
export function forgetView(content: string) {
  const root = byId(content)
  for (const form of root.querySelectorAll('form')) form.reset()
  for (const shown of root.querySelectorAll('div[id]')) shown.replaceChildren()
  for (const line of root.querySelectorAll('.status')) line.textContent = ''
  for (const detail of root.querySelectorAll<HTMLElement>('[data-detail]')) detail.hidden = true
  eraseCharts(root)
}

/** After a reload: a token still in the tab fills the page; one the gateway refuses is forgotten. */
export function resume(secret: Secret, content: string, showAll: () => Promise<void>) {
  if (!secret.get()) return
  showSignedIn(content, true)
  showAll().catch((error) => {
    secret.clear()
    showSignedIn(content, false)
    forgetView(content)
    say(byId('signin-status'), `Sign in again: ${String(error)}`, 'alert')
  })
}

/**
 * The pasted-token sign-in (#signin-form with its `input`): `check` tries the token before the
 * page is filled and a refused one is not kept; #signout forgets it.
 */
export function pastedToken(options: {
  secret: Secret
  input: string
  content: string
  focus: string
  what: string
  check: () => Promise<void>
  showAll: () => Promise<void>
}) {
  const { secret, content } = options
  onSubmit(byId<HTMLFormElement>('signin-form'), byId('signin-status'), async (data) => {
    secret.set(String(data.get(byId<HTMLInputElement>(options.input).name) ?? '').trim())
    try {
      await options.check()
    } catch (error) {
      secret.clear()
      throw error
    }
    byId<HTMLInputElement>(options.input).value = ''
    showSignedIn(content, true)
    await options.showAll()
    byId(options.focus).focus()
  })
  byId('signout').addEventListener('click', () => {
    secret.clear()
    showSignedIn(content, false)
    forgetView(content)
    say(byId('signin-status'), `Signed out: the ${options.what} is gone from this tab.`)
    byId(options.input).focus()
  })
  resume(secret, content, options.showAll)
}
