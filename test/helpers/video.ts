// A video job retrieved as a client does: polled while it answers processing.

/** Retrieves job `id` until it stops answering processing: its MP4, or an error. */
export async function retrieveWhenDone(
  post: (path: string, json: unknown) => Promise<Response>,
  id: string,
): Promise<Response> {
  // No deadline of its own: the test's time limit is the hang guard.
  for (;;) {
    const media = await post('/v1/video/retrieve', { id })
    if (media.status !== 200 || !media.headers.get('content-type')?.startsWith('application/json'))
      return media
    await media.json()
    await Bun.sleep(20)
  }
}
