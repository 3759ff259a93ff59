// The most prompt tokens an image part can cost on any vision model the catalog may serve, for the
// hold. From a data URL the image's size is read from its header; a remote URL's size cannot be
// known before the supplier fetches it, so it holds the ceiling.

/**
 * No model's image encoding is known to exceed this per image: Qwen-VL's default pixel budget
 * (12,845,056 pixels in 28 x 28 patches) is 16,384 tokens; OpenAI's, Anthropic's, Gemini's and
 * Llama's schemes stay far below it.
 */
export const IMAGE_TOKENS_CEILING = 16_384

export interface ImageSize {
  width: number
  height: number
}

/** OpenAI's high-detail tiling: fit in 2048 x 2048, shortest side to 768, 170 per 512-px tile + 85. */
function tiledTokens({ width, height }: ImageSize): number {
  let w = width
  let h = height
  const fit = Math.min(1, 2048 / Math.max(w, h))
  w *= fit
  h *= fit
  const scale = 768 / Math.min(w, h)
  w *= scale
  h *= scale
  return 170 * Math.ceil(w / 512) * Math.ceil(h / 512) + 85
}

/**
 * An upper bound of one image's prompt tokens: the largest of OpenAI's tiles, patch models (32-px
 * patches, at most 1,536 of them, at the highest published multiplier 2.46), Qwen-VL (28-px patches)
 * and Anthropic (pixels / 750), never above the ceiling.
 */
export function imageTokenBound(size: ImageSize | null): number {
  if (!size || size.width < 1 || size.height < 1) return IMAGE_TOKENS_CEILING
  const { width, height } = size
  const patches = Math.ceil(Math.min(1536, Math.ceil(width / 32) * Math.ceil(height / 32)) * 2.46)
  const qwen = Math.ceil(width / 28) * Math.ceil(height / 28)
  const anthropic = Math.ceil((width * height) / 750)
  return Math.min(IMAGE_TOKENS_CEILING, Math.max(tiledTokens(size), patches, qwen, anthropic))
}

/** The part of the header each format's size is read from, at most (JPEG's SOF can sit later). */
const HEADER_BYTES = 64

const be16 = (b: Uint8Array, i: number) => (b[i]! << 8) | b[i + 1]!
const le16 = (b: Uint8Array, i: number) => b[i]! | (b[i + 1]! << 8)
const le24 = (b: Uint8Array, i: number) => b[i]! | (b[i + 1]! << 8) | (b[i + 2]! << 16)
const be32 = (b: Uint8Array, i: number) => ((b[i]! << 24) >>> 0) + ((b[i + 1]! << 16) | be16(b, i + 2))

/**
 * A GIF's size as decoders make it: the logical screen grown to cover every frame's extent
 * (Pillow does so), since a frame may reach past the screen the header names. Walks the blocks to
 * the end of the bytes, stepping over a byte that starts no block as Pillow does.
 */
function gifSize(b: Uint8Array): ImageSize {
  let width = le16(b, 6)
  let height = le16(b, 8)
  const colourTable = (flags: number) => (flags & 0x80 ? 3 << ((flags & 7) + 1) : 0)
  let i = 13 + colourTable(b[10]!)
  const skipSubBlocks = () => {
    while (i < b.length && b[i] !== 0) i += b[i]! + 1
    i += 1
  }
  while (i + 10 <= b.length) {
    const block = b[i]
    if (block === 0x21) {
      i += 2
      skipSubBlocks()
    } else if (block === 0x2c) {
      width = Math.max(width, le16(b, i + 1) + le16(b, i + 5))
      height = Math.max(height, le16(b, i + 3) + le16(b, i + 7))
      i += 10 + colourTable(b[i + 9]!) + 1 // the frame's colour table, then its LZW code size
      skipSubBlocks()
    } else i += 1
  }
  return { width, height }
}

/** PNG, GIF, WebP and JPEG sizes from their bytes; null for anything else or a broken header. */
export function imageSizeOf(bytes: Uint8Array): ImageSize | null {
  const n = bytes.length
  // PNG: the IHDR chunk follows the 8-byte signature.
  if (n >= 24 && bytes[0] === 0x89 && bytes[1] === 0x50 && bytes[2] === 0x4e && bytes[3] === 0x47)
    return { width: be32(bytes, 16), height: be32(bytes, 20) }
  // GIF87a / GIF89a: the logical screen and the frames' extents.
  if (n >= 10 && bytes[0] === 0x47 && bytes[1] === 0x49 && bytes[2] === 0x46) return gifSize(bytes)
  // WebP: RIFF....WEBP then a VP8, VP8L or VP8X chunk.
  if (n >= 30 && bytes[0] === 0x52 && bytes[8] === 0x57 && bytes[9] === 0x45 && bytes[10] === 0x42) {
    const chunk = String.fromCharCode(bytes[12]!, bytes[13]!, bytes[14]!, bytes[15]!)
    if (chunk === 'VP8 ') return { width: le16(bytes, 26) & 0x3fff, height: le16(bytes, 28) & 0x3fff }
    if (chunk === 'VP8L') {
      const bits = bytes[21]! | (bytes[22]! << 8) | (bytes[23]! << 16) | (bytes[24]! << 24)
      return { width: (bits & 0x3fff) + 1, height: ((bits >>> 14) & 0x3fff) + 1 }
    }
    if (chunk === 'VP8X') return { width: le24(bytes, 24) + 1, height: le24(bytes, 27) + 1 }
    return null
  }
  // JPEG: walk the segments to a start-of-frame marker.
  if (n >= 4 && bytes[0] === 0xff && bytes[1] === 0xd8) {
    let i = 2
    while (i + 9 < n) {
      if (bytes[i] !== 0xff) return null
      const marker = bytes[i + 1]!
      if (marker === 0xff) {
        i += 1
        continue
      }
      const isFrame =
        marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc
      if (isFrame) return { width: be16(bytes, i + 7), height: be16(bytes, i + 5) }
      i += 2 + be16(bytes, i + 2)
    }
  }
  return null
}

const DATA_URL = /^data:image\/[a-z0-9.+-]+;base64,/i

/** The size of an image given as a base64 data URL; null for a remote URL or an unreadable one. */
export function dataUrlImageSize(url: string): ImageSize | null {
  const match = DATA_URL.exec(url)
  if (!match) return null
  const start = match[0].length
  // PNG and WebP carry their size in the first bytes; a JPEG's frame header may come after its
  // metadata segments and a GIF's frames after its tables, so those are decoded whole (the body
  // limit bounds them).
  const whole = url.startsWith('/9j/', start) || url.startsWith('R0lG', start)
  const end = whole ? url.length : Math.min(url.length, start + Math.ceil(HEADER_BYTES / 3) * 4)
  return imageSizeOf(Buffer.from(url.slice(start, end), 'base64'))
}
