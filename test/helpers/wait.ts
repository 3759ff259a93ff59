// Waiting for a condition, not for a number of milliseconds: on a busy machine the thing waited for
// comes later, and only the test's own time limit (a hang guard) should end the wait.

/** Resolves once `condition` holds, checking every `everyMs`. */
export async function until(condition: () => boolean | Promise<boolean>, everyMs = 10): Promise<void> {
  while (!(await condition())) await Bun.sleep(everyMs)
}

/** Resolves once Redis's clock (the one its scripts read with TIME) is past `deadlineMs`. */
export async function untilRedisPasses(
  store: { time(): Promise<unknown[]> },
  deadlineMs: number,
): Promise<void> {
  await until(async () => {
    const [seconds, micros] = await store.time()
    return Number(seconds) * 1_000 + Math.floor(Number(micros) / 1_000) > deadlineMs
  })
}
