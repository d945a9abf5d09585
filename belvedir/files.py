"""File downloads and other streamed answers that stream under ASGI too.

Django's FileResponse reads its file through a sync iterator; served by the ASGI handler
(uvicorn, `make up`), StreamingHttpResponse.__aiter__ consumes a sync iterator whole
(`sync_to_async(list)`) before sending a byte, so a 2 GiB adapter zip would be held in memory.
This response reads the file a block at a time in a thread when iterated asynchronously, and
behaves as FileResponse does under WSGI and the test client. `ThreadedStreamingResponse` does
the same for any sync iterator (a command's output as it comes, a tar read from Docker).
"""

from concurrent.futures import ThreadPoolExecutor

from asgiref.sync import sync_to_async
from django.http import FileResponse, StreamingHttpResponse

READ_BYTES = 1024 * 1024  # per thread hop
_END = object()
# The threads that advance ThreadedStreamingResponse iterators, which may wait long for their
# next part (an exec stream: up to its 15 s heartbeat): a pool of their own, so they never
# take asyncio's default one (cpu count + 4 threads), which the rest of the server shares.
STREAM_THREADS = 256
_stream_pool = ThreadPoolExecutor(max_workers=STREAM_THREADS, thread_name_prefix="stream")


class StreamedFileResponse(FileResponse):
    async def __aiter__(self):
        handle = self.file_to_stream
        if handle is None:  # content replaced by something that is not a file
            async for part in super().__aiter__():
                yield part
            return
        read = sync_to_async(handle.read, thread_sensitive=False)
        size = max(self.block_size, READ_BYTES)  # the handler cuts it into its own chunks
        while chunk := await read(size):
            yield chunk


class ThreadedStreamingResponse(StreamingHttpResponse):
    """A StreamingHttpResponse of a sync iterator that, served under ASGI, sends each part as
    the iterator yields it: the iterator is advanced in a worker thread, one part per hop
    (Django's own would list it whole first). Under WSGI it is Django's."""

    async def __aiter__(self):
        if self.is_async:
            async for part in super().__aiter__():
                yield part
            return
        parts = self.streaming_content
        step = sync_to_async(next, thread_sensitive=False, executor=_stream_pool)
        while (part := await step(parts, _END)) is not _END:
            yield part
