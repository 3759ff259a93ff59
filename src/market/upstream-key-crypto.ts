// Upstream API keys at rest: AES-256-GCM under SVC_MASTER_KEY. The plaintext exists only in
// memory, on its way to the supplier; it is never returned, logged or put in an error.
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto'

const VERSION = 'v1'

export function encryptUpstreamKey(masterKey: Uint8Array, plaintext: string): string {
  const iv = randomBytes(12)
  const cipher = createCipheriv('aes-256-gcm', masterKey, iv)
  const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()])
  return [
    VERSION,
    iv.toString('base64'),
    body.toString('base64'),
    cipher.getAuthTag().toString('base64'),
  ].join(':')
}

export function decryptUpstreamKey(masterKey: Uint8Array, sealed: string): string {
  const [version, iv, body, tag] = sealed.split(':')
  if (version !== VERSION || !iv || !body || !tag)
    throw new Error('sealed upstream key has an unknown format')
  const decipher = createDecipheriv('aes-256-gcm', masterKey, Buffer.from(iv, 'base64'))
  decipher.setAuthTag(Buffer.from(tag, 'base64'))
  return Buffer.concat([decipher.update(Buffer.from(body, 'base64')), decipher.final()]).toString('utf8')
}

/** Decrypted keys by sealed text: the hot path decrypts each offer's key once per process. */
export class UpstreamKeyCache {
  private readonly plain = new Map<string, string>()
  constructor(private readonly masterKey: Uint8Array) {}

  open(sealed: string): string {
    let key = this.plain.get(sealed)
    if (key === undefined) {
      key = decryptUpstreamKey(this.masterKey, sealed)
      if (this.plain.size > 10_000) this.plain.clear()
      this.plain.set(sealed, key)
    }
    return key
  }
}
