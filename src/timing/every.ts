// What runs a periodic job: a timer in production; in a test, a driver that runs the lease renewer
// and the reaper in a fixed order, so neither can overtake the other when the machine is slow.

/** Runs `run` every `periodMs` until the returned stop is called. */
export type Every = (periodMs: number, run: () => unknown) => () => void

/** An unref'd interval timer: it never keeps the process alive on its own. */
export const onTimer: Every = (periodMs, run) => {
  const timer = setInterval(run, periodMs)
  timer.unref()
  return () => clearInterval(timer)
}
