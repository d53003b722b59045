"""The isolated worker's frames: whole, however a raw pipe takes them."""

from __future__ import annotations

import io
import os
import threading

from advisor.probes.isolated_worker import read_frame, write_frame


class _Trickle(io.RawIOBase):
    """A raw stream that takes at most ``most`` bytes per write, as a pipe interrupted by a
    signal does."""

    def __init__(self, most: int) -> None:
        self.most = most
        self.got = bytearray()

    def writable(self) -> bool:
        return True

    def write(self, b: bytes) -> int:  # type: ignore[override]
        taken = bytes(b[: self.most])
        self.got += taken
        return len(taken)


def test_a_frame_taken_a_little_at_a_time_arrives_whole() -> None:
    data = os.urandom(200_000)
    stream = _Trickle(most=4096)
    write_frame(stream, data)
    assert read_frame(io.BytesIO(bytes(stream.got))) == data


def test_a_frame_larger_than_a_pipe_buffer_crosses_a_real_pipe() -> None:
    data = os.urandom(1 << 20)  # 16 times Linux's default pipe buffer
    r, w = os.pipe()
    with os.fdopen(r, "rb", buffering=0) as reader, os.fdopen(w, "wb", buffering=0) as writer:
        sender = threading.Thread(target=write_frame, args=(writer, data))
        sender.start()
        assert read_frame(reader) == data
        sender.join()
