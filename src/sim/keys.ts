import type { SimFault } from './faults.ts'

/** What the simulated upstream knows of one API key: its DIEM balance and an injected fault. */
export interface SimKeyState {
  balanceMicroDiem: number
  fault: SimFault | null
  /** How many more requests the fault applies to; null for every request until cleared. */
  faultTimes: number | null
  requests: number
  /** Streams whose client went away before the end. */
  cancelledStreams: number
  /** Refused as Venice refuses an unknown or deleted key: 401 on every call. */
  revoked: boolean
}

/** The control API's name for every key without a fault of its own. */
export const ANY_KEY = '*'

export class SimKeys {
  private readonly keys = new Map<string, SimKeyState>()

  constructor(private readonly defaultBalanceMicroDiem: number) {}

  get(key: string): SimKeyState {
    let state = this.keys.get(key)
    if (!state) {
      state = {
        balanceMicroDiem: this.defaultBalanceMicroDiem,
        fault: null,
        faultTimes: null,
        requests: 0,
        cancelledStreams: 0,
        revoked: false,
      }
      this.keys.set(key, state)
    }
    return state
  }

  /**
   * The key's fault for this request, counting down a limited fault. A key with none of its own
   * takes the one set on the key `*`, if any (so a fault can be injected without knowing the key).
   */
  takeFault(own: SimKeyState): SimFault | null {
    const state = own.fault ? own : this.keys.get(ANY_KEY)
    if (!state?.fault) return null
    const fault = state.fault
    if (state.faultTimes !== null) {
      state.faultTimes -= 1
      if (state.faultTimes <= 0) {
        state.fault = null
        state.faultTimes = null
      }
    }
    return fault
  }

  /** Debits list-price burn, never below zero (the upstream stops at the balance it had). */
  debit(state: SimKeyState, burnMicroDiem: number): number {
    const debited = Math.min(burnMicroDiem, Math.max(0, state.balanceMicroDiem))
    state.balanceMicroDiem -= debited
    return debited
  }
}
