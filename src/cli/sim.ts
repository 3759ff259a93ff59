import { ConfigError } from '../config.ts'
import { parseMicros } from '../money/units.ts'
import { DEFAULT_SIM_SETTINGS, type SimSettings, startSim } from '../sim/server.ts'

function int(name: string, fallback: number): number {
  const raw = process.env[name]?.trim()
  if (!raw) return fallback
  if (!/^\d+$/.test(raw)) throw new ConfigError(name, 'a non-negative integer')
  return Number(raw)
}

export function simSettingsFromEnv(): Partial<SimSettings> & { port: number; hostname: string } {
  const balance = process.env.SIM_BALANCE_DIEM?.trim()
  const balanceMicros = balance ? parseMicros(balance) : DEFAULT_SIM_SETTINGS.defaultBalanceMicroDiem
  if (balanceMicros === null || balanceMicros < 0)
    throw new ConfigError('SIM_BALANCE_DIEM', 'a decimal amount')
  return {
    port: int('SIM_PORT', 8090),
    hostname: process.env.SIM_HOST?.trim() || '127.0.0.1',
    latencyMs: int('SIM_LATENCY_MS', DEFAULT_SIM_SETTINGS.latencyMs),
    ttftMs: int('SIM_TTFT_MS', DEFAULT_SIM_SETTINGS.ttftMs),
    tokensPerSecond: int('SIM_TOKENS_PER_SECOND', DEFAULT_SIM_SETTINGS.tokensPerSecond),
    outputTokens: int('SIM_OUTPUT_TOKENS', DEFAULT_SIM_SETTINGS.outputTokens),
    defaultBalanceMicroDiem: balanceMicros,
  }
}

export function sim(): void {
  const sim = startSim(simSettingsFromEnv())
  console.log(JSON.stringify({ msg: 'simulated supplier listening', url: sim.url }))
}
