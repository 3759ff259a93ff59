// A self-signed certificate for one DNS name, made by openssl in a temporary folder the caller
// removes: for tests that serve https on loopback.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

export interface SelfSigned {
  /** The certificate's file: what NODE_EXTRA_CA_CERTS names to trust it. */
  certPath: string
  /** For Bun.serve's tls; throws when openssl failed. */
  tls(): { cert: string; key: string }
  remove(): void
}

export function selfSignedCert(name: string): SelfSigned {
  const dir = mkdtempSync(join(tmpdir(), 'test-tls-'))
  const keyPath = join(dir, 'key.pem')
  const certPath = join(dir, 'cert.pem')
  const made = Bun.spawnSync([
    '/usr/bin/openssl',
    'req',
    '-x509',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-keyout',
    keyPath,
    '-out',
    certPath,
    '-days',
    '1',
    '-subj',
    `/CN=${name}`,
    '-addext',
    `subjectAltName=DNS:${name}`,
  ])
  return {
    certPath,
    tls() {
      if (made.exitCode !== 0) throw new Error(`openssl failed: ${made.stderr.toString()}`)
      return { cert: readFileSync(certPath, 'utf8'), key: readFileSync(keyPath, 'utf8') }
    },
    remove: () => rmSync(dir, { recursive: true, force: true }),
  }
}
