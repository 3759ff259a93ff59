// Scripts on a Redis Cluster as FCALLs of the function library (functions.ts), routed by their
// keys, rather than EVALSHA of each script's EVAL form, which runs the shared libraries again on
// every call (see BENCHMARKS.md, "Functions on every master"). The library is loaded on every master
// the first time a call finds it missing there (a new cluster, a master added or failed over to a
// node that never had it, FUNCTION FLUSH); a missing function ran nothing, so the call is sent again.
import type { Cluster } from 'ioredis'
import { type FunctionLibrary, functionName, loaded } from './functions.ts'

type Arg = string | number

export class ClusterFunctions {
  /** The load under way, shared by every call that found the function missing. */
  private loading: Promise<void> | null = null
  /** Cleared when this cluster's Redis has no functions (before 7.0): its scripts stay EVALSHA. */
  private functions = true

  constructor(
    private readonly cluster: Cluster,
    private readonly library: FunctionLibrary,
  ) {}

  /** FCALL of `script`, or undefined when this cluster runs no functions (the caller uses EVALSHA). */
  async call(script: string, keys: string[], args: Arg[]): Promise<unknown> {
    if (!this.functions) return undefined
    const command: Arg[] = [functionName(this.library, script), keys.length, ...keys, ...args]
    try {
      return await this.cluster.call('FCALL', ...command)
    } catch (error) {
      const message = (error as Error).message
      if (/unknown command\W+FCALL/i.test(message)) {
        this.functions = false
        return undefined
      }
      if (!/Function not found/i.test(message)) throw error
      await this.loadOnMasters()
      return this.cluster.call('FCALL', ...command)
    }
  }

  private loadOnMasters(): Promise<void> {
    this.loading ??= Promise.all(
      this.cluster.nodes('master').map((node) => loaded(node.call('FUNCTION', 'LOAD', this.library.code))),
    )
      .then(() => {})
      .finally(() => {
        this.loading = null
      })
    return this.loading
  }
}
