// Clearing a request: usage -> burn -> the clear script. Metered usage when the supplier reported it; else an
// estimate from the tokenizer, capped at the admitted max_tokens and the upstream key's pre-call
// balance, as the contract says.
import type { Admission } from '../market/admission.ts'
import type { ClearJournal, WrittenOn } from '../market/clear-journal.ts'
import type { Clearing } from '../market/clearing.ts'
import type { AttemptRef, MarketSteps } from '../market/steps.ts'
import type { UnsentClears } from '../market/unsent-clears.ts'
import { metrics } from '../metrics/gateway-metrics.ts'
import type { MicroDiem } from '../money/units.ts'
import { isRedisUnavailable } from '../redis/connection.ts'
import type { ReplicaBarrier } from '../redis/replica-barrier.ts'
import { whileStoreAway } from '../redis/store-retry.ts'
import type { ValidChat } from './chat-request.ts'
import { boundedPrompt, boundedUsage, burnOf, costDisagrees, type Usage } from './meter.ts'
import { countTokensBy } from './token-count.ts'
import { type ChatMessageLike, promptTokenCount } from './tokens.ts'

/**
 * Waits between tries of a clear that lost the store, by default: half a second in all (a dropped
 * connection, a reconnect), then its error stands, so that a buffered answer in a longer outage
 * still answers at once. A stream, whose client waits on an open connection, asks for longer.
 */
const CLEAR_RETRY_WAITS_MS = [50, 150, 300] as const

export interface ClearDeps {
  steps: MarketSteps
  /** Where acknowledged clears are kept a few seconds, to be sent again if Redis loses them. */
  journal?: ClearJournal
  /** Set (SVC_CLEAR_REPLICAS): a clear's cost is told once the masters' replicas have it. */
  barrier?: ReplicaBarrier
  /** Where a clear of the attempt writes (its slots and their masters), for the journal and the barrier. */
  writtenOn?: (attempt: AttemptRef) => WrittenOn
  feeBps: number
  /** How long a cleared attempt is kept as its request's record. */
  recordRetentionMs?: number
  /** Where the clear of an answer already delivered goes when the store never answered it. */
  unsent?: UnsentClears
}

export interface ClearedUsage extends Clearing {
  usage: Usage
  estimated: boolean
}

/** What settling needs of an admitted chat; a stream keeps only this, not the supplier's body. */
export type ClearedChat = Pick<ValidChat, 'model' | 'maxTokens' | 'choices' | 'promptTokenBound'>

export interface ClearUsageInput {
  /** What billing needs of the admitted request: its model's prices and the max tokens admitted. */
  chat: ClearedChat
  messages: ChatMessageLike[]
  /** The prompt fields the request sent beside its messages (tokens.ts promptFieldsOf). */
  promptFields: Record<string, unknown>
  admission: Admission
  preBalance: MicroDiem | null
  /** What the supplier reported; null when the answer ended without usage. */
  reported: Usage | null
  /**
   * A report that does not count the whole answer (an early one, more generated after it; or one
   * without a completion count): its prompt count is the upstream's, which the estimate bills.
   */
  partial?: Usage | null
  /** The upstream's own cost of the request, when its answer carried one. */
  upstreamCost?: MicroDiem | null
  /**
   * Output tokens counted as they streamed by (asked for only when nothing was reported); `count`
   * counts again what failed to be counted.
   */
  generatedTokens: (count: (text: string) => Promise<number>) => Promise<number>
  outcome: 'completed' | 'incomplete'
  /**
   * Waits between tries of the clear while the store is away (default: half a second in all); an
   * estimate's count that fails is asked again for as long as they last in all.
   */
  storeWaitsMs?: readonly number[]
  /** The buyer has the answer (a stream's content was sent): a clear the store never answers is kept. */
  delivered?: boolean
}

/**
 * The usage of an answer that reported none, by the tokenizer: its prompt by the upstream's own
 * count where a partial report gave one (bounded by the request's prompt bound), as the upstream
 * bills it and its tier follows it. The answer was delivered: a count that fails (its worker died,
 * or a burst of counts held it past its deadline) is asked again for as long as the clear may wait
 * (`storeWaitsMs` in all), rather than leave the attempt to the reaper, which charges nothing for
 * it. Past that its error stands, naming the attempt.
 */
export async function estimateUsage(input: ClearUsageInput): Promise<Usage> {
  const waitMs = (input.storeWaitsMs ?? CLEAR_RETRY_WAITS_MS).reduce((sum, ms) => sum + ms, 0)
  const deadline = Date.now() + waitMs
  const count = (text: string) => countTokensBy(text, deadline)
  const { chat, partial } = input
  try {
    const [promptTokens, generated] = await Promise.all([
      partial ? 0 : promptTokenCount(input.messages, input.promptFields, count),
      input.generatedTokens(count),
    ])
    // What was reported generated before more came is at least what the upstream bills for it.
    const completion = Math.max(generated, partial?.completionTokens ?? 0)
    const completionTokens = Math.min(completion, chat.maxTokens * chat.choices)
    if (!partial) return { promptTokens, completionTokens }
    // As a complete report (billedUsage): the prompt as reported where it burns no more than its
    // bound would, else the bound.
    const asReported = { ...partial, completionTokens }
    const bounded = { ...boundedPrompt(partial, chat.promptTokenBound), completionTokens }
    const { prices } = chat.model
    return burnOf(asReported, prices) <= burnOf(bounded, prices) ? asReported : bounded
  } catch (error) {
    const { attemptId } = input.admission
    throw new Error(`attempt ${attemptId} not counted in ${waitMs} ms: ${(error as Error).message}`)
  }
}

/**
 * The usage a complete report is billed for, and so shown and recorded. A report is checked before
 * it moves money: counts past what the request allows are billed at what it allows (boundedUsage),
 * and the burn reported beyond it is disputed, as burn past the hold is. A report that burns no
 * more than that (a prompt past its bound, but mostly cheap cache reads) is billed as it is.
 */
function billedUsage(reported: Usage, chat: ClearedChat): Usage {
  const bounded = boundedUsage(reported, chat.promptTokenBound, chat.maxTokens * chat.choices)
  if (bounded === reported) return reported
  const { prices } = chat.model
  return burnOf(reported, prices) <= burnOf(bounded, prices) ? reported : bounded
}

export async function clearUsage(deps: ClearDeps, input: ClearUsageInput): Promise<ClearedUsage> {
  const { chat, reported } = input
  const estimated = reported === null
  const usage = reported ? billedUsage(reported, chat) : await estimateUsage(input)
  let burn = burnOf(usage, chat.model.prices)
  const before = input.preBalance ?? input.admission.upstreamBalance
  if (estimated && before !== null && burn > before) burn = before
  const reportedBurn = reported && usage !== reported ? burnOf(reported, chat.model.prices) : burn
  // The upstream's figure is compared with the meter's reading of its report, never billed.
  const upstreamCost = input.upstreamCost ?? null
  const disagreed = !estimated && upstreamCost !== null && costDisagrees(reportedBurn, upstreamCost)
  const clearing = await clearBurn(
    deps,
    input.admission,
    before,
    reportedBurn,
    {
      inputTokens: usage.promptTokens,
      outputTokens: usage.completionTokens,
      estimated,
      outcome: input.outcome,
      upstreamCost: disagreed ? upstreamCost : null,
      boundedBurn: reportedBurn === burn ? null : burn,
    },
    input.storeWaitsMs,
    input.delivered,
  )
  return { ...clearing, usage, estimated }
}

/**
 * Clears an attempt at a known burn, billed at most `record.boundedBurn` of it where given. The
 * upstream key's balance after it is its balance before (reported by the upstream, else the last
 * known) less this burn.
 */
export async function clearBurn(
  deps: ClearDeps,
  attempt: AttemptRef,
  before: MicroDiem | null,
  burn: MicroDiem,
  record: {
    inputTokens: number
    outputTokens: number
    estimated: boolean
    outcome: 'completed' | 'incomplete'
    upstreamCost?: MicroDiem | null
    boundedBurn?: MicroDiem | null
  },
  storeWaitsMs: readonly number[] = CLEAR_RETRY_WAITS_MS,
  delivered = false,
): Promise<Clearing> {
  const after = before === null ? null : (Math.max(0, before - burn) as MicroDiem)
  // The work is done and the clear is idempotent: a store that blinks (a lost connection, a
  // failover) costs the buyer a short wait, not an error, and a clear whose reply was lost is
  // replayed for its result rather than left unheard.
  const req = {
    burn,
    feeBps: deps.feeBps,
    upstreamBalanceAfter: after,
    ...record,
    recordRetentionMs: deps.recordRetentionMs,
  }
  let clearing: Clearing
  try {
    clearing = await whileStoreAway(() => deps.steps.clear(attempt, req), storeWaitsMs)
  } catch (error) {
    // Delivered, so owed: sent again once the store serves (or by the next start), never left to
    // the reaper, which charges nothing.
    if (delivered && isRedisUnavailable(error)) deps.unsent?.keep(attempt, req)
    throw error
  }
  const written = deps.writtenOn?.(attempt)
  deps.journal?.record(attempt, req, written)
  if (deps.barrier) metrics.clearReplicaWaits.inc({ outcome: await deps.barrier.passed(written?.masters) })
  if (!clearing.replay) {
    metrics.clears.inc({ usage: record.estimated ? 'estimated' : 'metered' })
    if (record.upstreamCost != null) metrics.costDisagreements.inc()
    if (clearing.disputed > 0) {
      metrics.disputedClears.inc()
      metrics.disputedBurn.inc({}, clearing.disputed)
    }
  }
  return clearing
}
