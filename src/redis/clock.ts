// Redis's clock, as the scripts read it (TIME): what a reader compares with the scripts' stamps
// (budget periods, retention bounds, deadlines), whatever this host's clock says.
import type { Commands } from './store.ts'

/** Redis's time now, ms. */
export async function redisNow(store: Pick<Commands, 'time'>): Promise<number> {
  const [seconds, micros] = await store.time()
  return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000)
}
