// Faults the simulated supplier can inject, chosen per request (the `x-sim-fault` header) or per
// upstream key (the control API), so that every failure the gateway must survive can be produced.

export const SIM_FAULTS = [
  'error_5xx', // 503 before any byte
  'rate_limit', // 429 before any byte
  'out_of_balance', // 402 before any byte, as when the key's DIEM is spent
  'truncate', // the body stops mid-way: no usage chunk, no [DONE]
  'stall', // some bytes, then silence until the client gives up
  'slow_first_byte', // the first byte comes only after a delay
  'job_fail', // video: the job is accepted, then fails; its DIEM is refunded
] as const

export type SimFault = (typeof SIM_FAULTS)[number]

export function isSimFault(value: unknown): value is SimFault {
  return typeof value === 'string' && (SIM_FAULTS as readonly string[]).includes(value)
}

/** Venice-style error bodies (`{"error": "..."}`) for the faults that answer before any byte. */
export const FAULT_RESPONSES: Partial<Record<SimFault, { status: number; error: string }>> = {
  error_5xx: { status: 503, error: 'The model is at capacity. Please try again later.' },
  rate_limit: { status: 429, error: 'Rate limit exceeded. Please slow down.' },
  out_of_balance: { status: 402, error: 'Insufficient USD or DIEM balance to complete request.' },
}
