// Content a supplier gives as a list of parts rather than a string: Mistral's reasoning models send
// `[{type:'thinking', thinking:[{type:'text', text}]}, {type:'text', text}]`, some OpenAI-compatible
// servers `[{type:'text', text}]`, in stream deltas and buffered messages alike. Read only when the
// content is no string: the common answer pays one typeof check.
import { isRecord } from './json-object.ts'

/** One piece of such content: text of the answer, or the model's thinking (reasoning). */
export interface ContentPiece {
  thinking: boolean
  text: string
}

/** Thinking as Mistral gives it: a list of text parts (or, from some servers, a string). */
function thinkingText(thinking: unknown): string {
  if (typeof thinking === 'string') return thinking
  if (!Array.isArray(thinking)) return ''
  let text = ''
  for (const part of thinking) {
    if (typeof part === 'string') text += part
    else if (isRecord(part) && typeof part.text === 'string') text += part.text
  }
  return text
}

/** The text and thinking of content given as parts, in their order; parts with neither are skipped. */
export function contentPieces(content: unknown[]): ContentPiece[] {
  const pieces: ContentPiece[] = []
  for (const part of content) {
    let piece: ContentPiece | null = null
    if (typeof part === 'string') piece = { thinking: false, text: part }
    else if (!isRecord(part)) continue
    else if (part.type === 'thinking') piece = { thinking: true, text: thinkingText(part.thinking) }
    else if (typeof part.text === 'string') piece = { thinking: false, text: part.text }
    if (piece?.text) pieces.push(piece)
  }
  return pieces
}

/** The answer text and the thinking of a message's or delta's content, string or parts. */
export function contentText(content: unknown): { text: string; thinking: string } {
  if (typeof content === 'string') return { text: content, thinking: '' }
  let text = ''
  let thinking = ''
  if (Array.isArray(content)) {
    for (const piece of contentPieces(content)) {
      if (piece.thinking) thinking += piece.text
      else text += piece.text
    }
  }
  return { text, thinking }
}
