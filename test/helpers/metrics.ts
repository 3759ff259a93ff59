// One series of a stack's /metrics, read as an operator's scraper reads it.
import { adminFetch } from './accounts.ts'
import type { TestStack } from './stack.ts'

/**
 * The value of `series`, its name and labels as /metrics prints them (`svc_x_total{found="kept"}`);
 * 0 before its first count.
 */
export async function metricValue(stack: TestStack, series: string): Promise<number> {
  const text = await (await adminFetch(stack, '/metrics')).text()
  const line = text.split('\n').find((l) => l.startsWith(`${series} `))
  return line ? Number(line.slice(series.length + 1)) : 0
}
