// Reading one environment variable as a checked value: the primitives src/config.ts builds the
// gateway's config from. A bad or missing value throws ConfigError, naming the variable.
export class ConfigError extends Error {
  constructor(
    readonly variable: string,
    readonly expected: string,
  ) {
    super(`config: ${variable} must be ${expected}`)
  }
}

export type Env = Record<string, string | undefined>

export function read(env: Env, name: string): string | undefined {
  const value = env[name]?.trim()
  return value === '' ? undefined : value
}

export function required(env: Env, name: string, expected: string): string {
  const value = read(env, name)
  if (value === undefined) throw new ConfigError(name, `set to ${expected}`)
  return value
}

export function integer(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = read(env, name)
  if (raw === undefined) return fallback
  if (!/^-?\d+$/.test(raw)) throw new ConfigError(name, `an integer from ${min} to ${max}`)
  const value = Number(raw)
  if (value < min || value > max) throw new ConfigError(name, `an integer from ${min} to ${max}`)
  return value
}

export function url(env: Env, name: string, schemes: string[], fallback?: string): string {
  const raw = read(env, name) ?? fallback
  const expected = `a URL (${schemes.map((s) => `${s}//`).join(' or ')}...)`
  if (raw === undefined) throw new ConfigError(name, `set to ${expected}`)
  try {
    const parsed = new URL(raw)
    if (!schemes.includes(parsed.protocol)) throw new Error('scheme')
  } catch {
    throw new ConfigError(name, expected)
  }
  return raw.replace(/\/+$/, '')
}

export function oneOf<T extends string>(env: Env, name: string, options: readonly T[], fallback: T): T {
  const raw = read(env, name) ?? fallback
  if (!options.includes(raw as T)) throw new ConfigError(name, `one of ${options.join(', ')}`)
  return raw as T
}

/** Several required variables unset (a first start): one line naming them all, not one per try. */
export function refuseUnset(env: Env, names: readonly string[]): void {
  const unset = names.filter((name) => read(env, name) === undefined)
  if (unset.length < 2) return
  const others = unset.slice(1).join(', ')
  throw new ConfigError(
    unset[0]!,
    `set, as must ${others} (README, Configuration; \`svc-gateway demo\` needs none of them)`,
  )
}
