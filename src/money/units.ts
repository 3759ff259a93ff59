// Money is integers only: micro-USDC (6 decimals, as on chain) and micro-DIEM (1 DIEM = $1 of
// upstream list price). Branded types keep the two from being mixed up by accident.

export type MicroUsdc = number & { readonly __unit: 'micro-usdc' }
export type MicroDiem = number & { readonly __unit: 'micro-diem' }

export const MICROS_PER_UNIT = 1_000_000

const DECIMAL = /^(-?)(\d{1,15})(?:\.(\d{1,6}))?$/

/** Parses a decimal string or a JSON number with at most 6 fractional digits into micro units. */
export function parseMicros(value: string | number): number | null {
  const text = typeof value === 'number' ? numberToPlainString(value) : value.trim()
  if (text === null) return null
  const match = DECIMAL.exec(text)
  if (!match) return null
  const [, sign, whole, fraction = ''] = match
  const micros = Number(whole) * MICROS_PER_UNIT + Number(fraction.padEnd(6, '0'))
  if (!Number.isSafeInteger(micros)) return null
  return sign === '-' ? -micros : micros
}

/** A balance's digits past the sixth decimal: cut, so a balance read is never more than was told. */
const FINER_BALANCE = /^(\d{1,15}\.\d{6})\d+$/

/**
 * A DIEM balance an upstream reports (a header's text, or a JSON number or decimal string): micro-DIEM,
 * rounded down past the sixth decimal, or null for anything but a finite non-negative amount, so an
 * odd answer is no balance rather than a wrong one.
 */
export function parseDiemBalance(value: unknown): MicroDiem | null {
  // A number as JSON wrote it (its shortest form): 0.3 is 0.3, not the double's expansion below it.
  const text =
    typeof value === 'string' ? value.trim() : typeof value === 'number' ? numberToPlainString(value) : null
  if (text === null) return null
  const micros = parseMicros(FINER_BALANCE.exec(text)?.[1] ?? text)
  return micros === null || micros < 0 ? null : (micros as MicroDiem)
}

// JSON numbers such as 0.7 print as "0.7"; exponent forms (1e-7) carry more than 6 decimals.
function numberToPlainString(value: number): string | null {
  if (!Number.isFinite(value)) return null
  const text = String(value)
  return /e/i.test(text) ? null : text
}

/** Formats micro units as a decimal string with exactly 6 fractional digits: the wire format. */
export function formatMicros(micros: number): string {
  if (!Number.isSafeInteger(micros)) throw new RangeError(`not an integer amount: ${micros}`)
  const sign = micros < 0 ? '-' : ''
  const abs = Math.abs(micros)
  const whole = Math.floor(abs / MICROS_PER_UNIT)
  const fraction = String(abs % MICROS_PER_UNIT).padStart(6, '0')
  return `${sign}${whole}.${fraction}`
}

/** Integer ceiling of a * b / d for non-negative safe integers, exact even past 2^53 intermediates. */
export function mulDivCeil(a: number, b: number, d: number): number {
  return sumDivCeil([[a, b]], d)
}

/**
 * Integer ceiling of (a1 * b1 + a2 * b2 + ...) / d for non-negative safe integers: the products
 * summed exactly and divided once.
 */
export function sumDivCeil(products: readonly (readonly [number, number])[], d: number): number {
  // Every request's amounts are small: while the sum plus d stays a safe integer every product and
  // partial sum is exact (one past it rounds to at least 2^53, and adding non-negatives keeps it
  // there, so the check sees it), and the quotient's fraction (at least 1/d from the next integer,
  // more than half the quotient's spacing) survives the division's rounding: floor is exact.
  let small = 0
  for (const [a, b] of products) small += a * b
  if (small + d <= Number.MAX_SAFE_INTEGER) return Math.floor((small + d - 1) / d)
  let sum = 0n
  for (const [a, b] of products) sum += BigInt(a) * BigInt(b)
  const divisor = BigInt(d)
  return Number((sum + divisor - 1n) / divisor)
}

/**
 * Burn in micro-DIEM of one bill: each [tokens, micro-DIEM per million] term priced exactly, the
 * whole sum rounded up once, as the upstream bills a request.
 */
export function billBurn(terms: readonly (readonly [number, number])[]): MicroDiem {
  return sumDivCeil(terms, MICROS_PER_UNIT) as MicroDiem
}

/** Buyer cost in micro-USDC of a burn at an ask in cents per dollar: ceil(burn * cents / 100). */
export function costAtAsk(burn: MicroDiem, askCents: number): MicroUsdc {
  return mulDivCeil(burn, askCents, 100) as MicroUsdc
}

/**
 * A USD (= DIEM) amount an upstream answers as a JSON number, in micro units rounded `up` or `down`
 * past the sixth decimal (exactly, from the number's shortest decimal form); null for anything but
 * a finite non-negative number at most `maxMicros`.
 */
export function usdNumberToMicros(value: unknown, round: 'up' | 'down', maxMicros: number): number | null {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) return null
  if (value > maxMicros / MICROS_PER_UNIT) return null
  // Shortest form: digits and a decimal exponent (0.35 -> 35e-2, 1e-7 -> 1e-7).
  const [mantissa = '0', exponent = '0'] = String(value).split('e')
  const [whole = '0', fraction = ''] = mantissa.split('.')
  const digits = BigInt(whole + fraction)
  const shift = 6 - fraction.length + Number(exponent)
  if (shift >= 0) return Number(digits * 10n ** BigInt(shift))
  const divisor = 10n ** BigInt(-shift)
  const micros = digits / divisor
  return Number(round === 'up' && micros * divisor < digits ? micros + 1n : micros)
}
