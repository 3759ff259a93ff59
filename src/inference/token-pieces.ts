// Byte-pair merging takes time growing with the square of a run with no break in it (200,000
// letters of one kind took half a minute to count), so text is counted in pieces of at most
// TOKEN_PIECE characters: cut at a space where one is near, never inside a surrogate pair. A cut
// can only add a token at the seam, and no piece counts more tokens than it has bytes, so a count
// stays under the hold's bound.
export const TOKEN_PIECE = 1_000

const highSurrogate = (code: number) => code >= 0xd800 && code <= 0xdbff

/** The text in order, in pieces of at most TOKEN_PIECE characters. */
export function textPieces(text: string): string[] {
  const pieces: string[] = []
  for (let at = 0; at < text.length; ) {
    let end = Math.min(at + TOKEN_PIECE, text.length)
    if (end < text.length) {
      const space = text.lastIndexOf(' ', end)
      if (space > at + TOKEN_PIECE / 2) end = space
      else if (highSurrogate(text.charCodeAt(end - 1))) end -= 1
    }
    pieces.push(text.slice(at, end))
    at = end
  }
  return pieces
}
