// The prompt side of the hold: image sizes read from real headers (built here byte by byte, as
// encoders lay them out), the image token bound, and promptTokenBound as a true upper bound of
// what a tokenizer makes of every string the supplier could turn into prompt text.
import { describe, expect, test } from 'bun:test'
import fc from 'fast-check'
import { countTokens } from 'gpt-tokenizer'
import {
  dataUrlImageSize,
  IMAGE_TOKENS_CEILING,
  imageSizeOf,
  imageTokenBound,
} from '../../src/inference/image-tokens.ts'
import { type ChatMessageLike, promptTokenBound } from '../../src/inference/tokens.ts'

const AS_TEXT = { disallowedSpecial: new Set<string>() }
const tokens = (text: string) => countTokens(text, AS_TEXT)

const ascii = (text: string) => [...text].map((c) => c.charCodeAt(0))
const be16 = (n: number) => [(n >>> 8) & 0xff, n & 0xff]
const be32 = (n: number) => [(n >>> 24) & 0xff, (n >>> 16) & 0xff, (n >>> 8) & 0xff, n & 0xff]
const le16 = (n: number) => [n & 0xff, (n >>> 8) & 0xff]
const le24 = (n: number) => [n & 0xff, (n >>> 8) & 0xff, (n >>> 16) & 0xff]
const le32 = (n: number) => [...le16(n & 0xffff), ...le16(n >>> 16)]
const filler = (n: number, seed = 7) => Array.from({ length: n }, (_, i) => (i * 31 + seed) & 0x7f)

function pngChunk(type: string, data: number[]): number[] {
  const body = new Uint8Array([...ascii(type), ...data])
  return [...be32(data.length), ...body, ...be32(Bun.hash.crc32(body))]
}

function png(width: number, height: number): Uint8Array {
  return new Uint8Array([
    0x89,
    ...ascii('PNG\r\n\x1a\n'),
    ...pngChunk('IHDR', [...be32(width), ...be32(height), 8, 6, 0, 0, 0]),
    ...pngChunk('IDAT', filler(40)),
    ...pngChunk('IEND', []),
  ])
}

function gif(width: number, height: number): Uint8Array {
  return new Uint8Array([
    ...ascii('GIF89a'),
    ...le16(width),
    ...le16(height),
    0x80, // a global colour table of two entries
    0,
    0,
    ...[0, 0, 0, 255, 255, 255],
    0x2c, // image descriptor: the frame covers the logical screen
    ...le16(0),
    ...le16(0),
    ...le16(width),
    ...le16(height),
    0,
    2,
    2,
    0x4c,
    0x01,
    0,
    0x3b,
  ])
}

/**
 * A GIF whose frames reach past its logical screen (a 256-colour table and a comment before the
 * first frame): decoders such as Pillow grow the image to cover every frame it shows.
 */
function gifWithFrames(screen: [number, number], frames: [number, number, number, number][]): Uint8Array {
  const bytes = [...ascii('GIF89a'), ...le16(screen[0]), ...le16(screen[1]), 0xf7, 0, 0, ...filler(768, 4)]
  bytes.push(0x21, 0xfe, 5, ...ascii('hello'), 0) // a comment extension
  for (const [x, y, w, h] of frames) {
    bytes.push(0x21, 0xf9, 4, 0, 10, 0, 0, 0) // graphic control: a delay, as animations carry
    bytes.push(0x2c, ...le16(x), ...le16(y), ...le16(w), ...le16(h), 0x81, ...filler(12, 6)) // local table
    bytes.push(2, 3, 0x4c, 0x01, 0x00, 1, 0x05, 0) // LZW code size, then data sub-blocks
  }
  bytes.push(0x3b)
  return new Uint8Array(bytes)
}

/** A JPEG marker segment: FF, marker, length (its own two bytes included), payload. */
const segment = (marker: number, payload: number[]) => [0xff, marker, ...be16(payload.length + 2), ...payload]
const frame = (marker: number, width: number, height: number) =>
  segment(marker, [8, ...be16(height), ...be16(width), 3, 1, 0x22, 0, 2, 0x11, 1, 3, 0x11, 1])
const quantTable = segment(0xdb, [0, ...filler(64, 3)])
const huffmanTable = segment(0xc4, [0, ...Array(16).fill(1), ...filler(16, 5)])
const scan = [...segment(0xda, [3, 1, 0, 2, 0x11, 3, 0x11, 0, 63, 0]), ...filler(200, 9)]

function baselineJpeg(width: number, height: number): Uint8Array {
  const jfif = segment(0xe0, [...ascii('JFIF\0'), 1, 1, 0, 0, 1, 0, 1, 0, 0])
  return new Uint8Array([
    0xff,
    0xd8,
    ...jfif,
    ...quantTable,
    ...frame(0xc0, width, height),
    ...huffmanTable,
    ...scan,
    0xff,
    0xd9,
  ])
}

/**
 * A progressive JPEG as cameras and editors write them: EXIF (with an embedded thumbnail that has
 * its own SOI and baseline frame of another size), an ICC profile and a comment before the frame,
 * Huffman tables (FF C4, not a frame) and fill bytes in between.
 */
function progressiveJpeg(width: number, height: number): Uint8Array {
  const thumbnail = [0xff, 0xd8, ...frame(0xc0, 160, 120), 0xff, 0xd9]
  const exif = segment(0xe1, [
    ...ascii('Exif\0\0MM\0*'),
    ...be32(8),
    ...filler(3000, 1),
    ...thumbnail,
    ...filler(100),
  ])
  const icc = segment(0xe2, [...ascii('ICC_PROFILE\0'), 1, 1, ...filler(600, 2)])
  const comment = segment(0xfe, ascii('made by hand'))
  return new Uint8Array([
    0xff,
    0xd8,
    ...exif,
    ...icc,
    ...comment,
    ...quantTable,
    ...huffmanTable,
    0xff, // fill bytes may precede any marker
    0xff,
    ...frame(0xc2, width, height),
    ...scan,
    0xff,
    0xd9,
  ])
}

function riff(chunk: string, data: number[]): Uint8Array {
  const body = [...ascii('WEBP'), ...ascii(chunk), ...le32(data.length), ...data]
  return new Uint8Array([...ascii('RIFF'), ...le32(body.length), ...body])
}

/** Lossy: a key frame's tag, the start code, 14-bit sizes whose top two bits are scaling hints. */
const webpVp8 = (width: number, height: number) =>
  riff('VP8 ', [
    0x50,
    0x2a,
    0x00,
    0x9d,
    0x01,
    0x2a,
    ...le16(width | 0x4000),
    ...le16(height | 0xc000),
    ...filler(30),
  ])

/** Lossless: the signature byte, then width - 1 and height - 1 in 14 bits each, alpha, version. */
const webpVp8l = (width: number, height: number) =>
  riff('VP8L', [0x2f, ...le32((width - 1) | ((height - 1) << 14) | (1 << 28)), ...filler(30)])

/** Extended: flags, three reserved bytes, the canvas's width - 1 and height - 1 in 24 bits each. */
const webpVp8x = (width: number, height: number) =>
  riff('VP8X', [0x10, 0, 0, 0, ...le24(width - 1), ...le24(height - 1)])

const dataUrl = (media: string, bytes: Uint8Array) =>
  `data:${media};base64,${Buffer.from(bytes).toString('base64')}`

describe('imageSizeOf reads the size from real headers', () => {
  const cases: [string, (w: number, h: number) => Uint8Array, number, number][] = [
    ['PNG', png, 1920, 1080],
    ['GIF', gif, 640, 481],
    ['baseline JPEG', baselineJpeg, 4032, 3024],
    ['progressive JPEG behind EXIF, ICC and a comment', progressiveJpeg, 3000, 4000],
    ['WebP VP8 (lossy)', webpVp8, 1023, 767],
    ['WebP VP8L (lossless)', webpVp8l, 16_384, 1],
    ['WebP VP8X (extended)', webpVp8x, 16_777_216, 300],
  ]
  for (const [name, build, width, height] of cases) {
    test(name, () => {
      expect(imageSizeOf(build(width, height))).toEqual({ width, height })
      expect(imageSizeOf(build(1, 1))).toEqual({ width: 1, height: 1 })
    })
  }

  test('anything else, or a header cut short, has no size', () => {
    expect(imageSizeOf(new Uint8Array(0))).toBeNull()
    expect(imageSizeOf(new TextEncoder().encode('%PDF-1.7 not an image at all, long enough'))).toBeNull()
    expect(imageSizeOf(png(10, 10).subarray(0, 20))).toBeNull()
    expect(imageSizeOf(progressiveJpeg(10, 10).subarray(0, 3000))).toBeNull()
    expect(imageSizeOf(riff('ALPH', filler(30)))).toBeNull()
  })
})

test('a GIF is as large as the frames it shows, past its logical screen', () => {
  const big = gifWithFrames(
    [1, 1],
    [
      [0, 0, 1, 1],
      [100, 50, 3000, 2000],
    ],
  )
  expect(imageSizeOf(big)).toEqual({ width: 3100, height: 2050 })
  expect(dataUrlImageSize(dataUrl('image/gif', big))).toEqual({ width: 3100, height: 2050 })
  expect(imageSizeOf(gifWithFrames([640, 480], [[0, 0, 640, 480]]))).toEqual({ width: 640, height: 480 })
})

describe('dataUrlImageSize', () => {
  test('reads PNG, GIF, WebP and JPEG data URLs (a JPEG frame far past the first bytes too)', () => {
    expect(dataUrlImageSize(dataUrl('image/png', png(800, 600)))).toEqual({ width: 800, height: 600 })
    expect(dataUrlImageSize(dataUrl('image/gif', gif(33, 44)))).toEqual({ width: 33, height: 44 })
    expect(dataUrlImageSize(dataUrl('image/webp', webpVp8x(2000, 1000)))).toEqual({
      width: 2000,
      height: 1000,
    })
    expect(dataUrlImageSize(dataUrl('image/jpeg', progressiveJpeg(1234, 567)))).toEqual({
      width: 1234,
      height: 567,
    })
    expect(dataUrlImageSize(dataUrl('IMAGE/JPEG', baselineJpeg(64, 48)))).toEqual({ width: 64, height: 48 })
  })

  test('a remote URL, another media type or an undecodable payload has no size', () => {
    expect(dataUrlImageSize('https://example.com/cat.png')).toBeNull()
    expect(dataUrlImageSize(dataUrl('application/pdf', png(8, 8)))).toBeNull()
    expect(dataUrlImageSize('data:image/png;base64,')).toBeNull()
    expect(dataUrlImageSize('data:image/png;base64,!!!!not-base64!!!!')).toBeNull()
  })
})

describe('imageTokenBound', () => {
  test('a 512 x 512 image holds at least what OpenAI high detail charges (765)', () => {
    expect(imageTokenBound({ width: 512, height: 512 })).toBeGreaterThanOrEqual(765)
  })

  test('an unknown or empty size holds the ceiling', () => {
    expect(imageTokenBound(null)).toBe(IMAGE_TOKENS_CEILING)
    expect(imageTokenBound({ width: 0, height: 100 })).toBe(IMAGE_TOKENS_CEILING)
    expect(imageTokenBound({ width: 100, height: 0 })).toBe(IMAGE_TOKENS_CEILING)
  })

  const side = fc.integer({ min: 1, max: 1_000_000 })
  test('never above the ceiling, never below one tile', () => {
    fc.assert(
      fc.property(side, side, (width, height) => {
        const bound = imageTokenBound({ width, height })
        expect(bound).toBeLessThanOrEqual(IMAGE_TOKENS_CEILING)
        expect(bound).toBeGreaterThanOrEqual(255)
      }),
      { numRuns: 2000 },
    )
  })

  test('monotone in size: the same image scaled up never holds less', () => {
    const small = fc.integer({ min: 1, max: 5000 })
    fc.assert(
      fc.property(small, small, fc.integer({ min: 1, max: 40 }), (width, height, k) => {
        expect(imageTokenBound({ width: width * k, height: height * k })).toBeGreaterThanOrEqual(
          imageTokenBound({ width, height }),
        )
      }),
      { numRuns: 2000 },
    )
  })

  test('square images hold more as they grow, up to the ceiling', () => {
    const bounds = [64, 256, 512, 768, 1024, 2048, 4096, 8192].map((s) =>
      imageTokenBound({ width: s, height: s }),
    )
    for (let i = 1; i < bounds.length; i++) expect(bounds[i]!).toBeGreaterThanOrEqual(bounds[i - 1]!)
    expect(imageTokenBound({ width: 8192, height: 8192 })).toBe(IMAGE_TOKENS_CEILING)
  })
})

const user = (content: unknown): ChatMessageLike[] => [{ role: 'user', content }]

describe('promptTokenBound is a true upper bound', () => {
  const piece = fc.oneof(
    fc.string({ unit: 'grapheme', maxLength: 60 }),
    fc.string({ unit: 'binary', maxLength: 60 }),
    fc.string({ unit: fc.constantFrom(...'0123456789'), maxLength: 200 }),
    fc.constantFrom('日本語のテキスト', '汉字', '🎉🚀👩‍👩‍👧‍👦', '<|endoftext|>', '\u0000\u001f', ' \n\t'),
  )
  const text = fc.array(piece, { maxLength: 12 }).map((parts) => parts.join(''))

  test('for random unicode text: at least the tokenizer count and the UTF-8 byte count', () => {
    fc.assert(
      fc.property(text, fc.boolean(), (s, asPart) => {
        const bound = promptTokenBound(user(asPart ? [{ type: 'text', text: s }] : s))
        expect(bound).toBeGreaterThanOrEqual(tokens(s))
        expect(bound).toBeGreaterThanOrEqual(Buffer.byteLength(s))
      }),
      { numRuns: 1500 },
    )
  })

  test('12,000 bytes of digits hold at least 12,000 tokens', () => {
    const digits = Array.from({ length: 12_000 }, (_, i) => String((i * 7) % 10)).join('')
    expect(promptTokenBound(user(digits))).toBeGreaterThanOrEqual(12_000)
  })

  test('tools, functions, tool_choice, response_format and prediction text is counted', () => {
    const description = '数字 123456789 🎉 '.repeat(300)
    const tool = {
      type: 'function',
      function: { name: 'lookup', description, parameters: { type: 'object', properties: {} } },
    }
    const schema = { type: 'json_schema', json_schema: { name: 'answer', schema: { description } } }
    const fields: Record<string, unknown> = {
      tools: [tool],
      functions: [tool.function],
      tool_choice: { type: 'function', function: { name: description } },
      response_format: schema,
      prediction: { type: 'content', content: description },
    }
    const base = promptTokenBound(user('hi'))
    for (const [name, value] of Object.entries(fields)) {
      const extra = promptTokenBound(user('hi'), { [name]: value }) - base
      expect(extra).toBeGreaterThanOrEqual(Buffer.byteLength(description))
      expect(extra).toBeGreaterThanOrEqual(tokens(JSON.stringify(value)))
    }
  })

  test("a 1 MB image data URL counts its image's bound, not a million tokens", () => {
    const image = new Uint8Array(1_000_000)
    image.set(png(1024, 768))
    const url = dataUrl('image/png', image)
    const bound = promptTokenBound(user([{ type: 'image_url', image_url: { url } }]))
    const expected = imageTokenBound({ width: 1024, height: 768 })
    expect(bound).toBeGreaterThanOrEqual(expected)
    expect(bound).toBeLessThan(expected + 200)
    // a remote image holds the ceiling
    const remote = promptTokenBound(
      user([{ type: 'image_url', image_url: { url: 'https://example.com/a.png' } }]),
    )
    expect(remote).toBeGreaterThanOrEqual(IMAGE_TOKENS_CEILING)
  })

  test('text carried beside an image URL in the same part is counted too', () => {
    // A supplier reads a part by its type: this one is text, whatever else it carries.
    const text = '7'.repeat(50_000)
    const part = { type: 'text', text, image_url: { url: 'https://example.com/a.png' } }
    expect(promptTokenBound(user([part]))).toBeGreaterThanOrEqual(50_000)
    const imagePart = { type: 'image_url', image_url: { url: dataUrl('image/png', png(8, 8)) }, text }
    expect(promptTokenBound(user([imagePart]))).toBeGreaterThanOrEqual(50_000)
  })
})
