"""The run's log tail: the last 16 KB, secrets redacted as output arrives, offsets that add up."""

import pytest

from runs.contract import clip_log_tail
from runs.logtail import LogTail, pump

SECRET = "sk-secret-0123456789"


def feed(tail: LogTail, text: str, size: int) -> list[str]:
    """Write `text` in chunks of `size` characters; the tail text after each chunk."""
    seen = []
    for i in range(0, len(text), size):
        tail.write(text[i : i + size])
        seen.append(tail.text())
    tail.close()
    seen.append(tail.text())
    return seen


@pytest.mark.parametrize("chunk", [1, 3, 7, 64, 10_000])
def test_a_secret_split_across_chunks_never_shows_even_in_part(chunk):
    tail = LogTail([SECRET])
    output = f"key one {SECRET} and\nkey two {SECRET}\nbye\n"
    seen = feed(tail, output, chunk)
    assert seen[-1] == "key one [redacted] and\nkey two [redacted]\nbye\n"
    for text in seen:
        assert SECRET[:4] not in text, "a piece of the secret was shown"


def test_the_size_counts_the_redacted_output_so_offsets_add_up():
    tail = LogTail([SECRET])
    feed(tail, f"a {SECRET} b\n" * 3, 5)
    assert tail.size == len(tail.text()) == len("a [redacted] b\n" * 3)


def test_text_that_only_looks_like_the_start_of_a_secret_is_kept():
    tail = LogTail([SECRET])
    tail.write("ends with sk-")
    assert tail.text() == "ends with "  # held back: it may be a secret
    tail.write("ip this\n")
    assert tail.text() == "ends with sk-ip this\n"
    tail.write("last word sk-s")
    tail.close()
    assert tail.text().endswith("last word sk-s")


def test_short_values_are_not_treated_as_secrets():
    tail = LogTail(["", "abc"])
    tail.write("abc abc\n")
    assert tail.text() == "abc abc\n"


def test_the_tail_keeps_the_last_16_kb_of_utf8_and_never_half_a_character():
    tail = LogTail([])
    line = "é" * 99 + "\n"  # 199 bytes
    for _ in range(500):
        tail.write(line)
    text = tail.text()
    assert len(text.encode("utf-8")) <= 16 * 1024
    assert len(text.encode("utf-8")) > 16 * 1024 - 4
    assert "\ufffd" not in text and text.endswith(line)
    assert tail.size == 500 * len(line)


def test_clipping_leaves_short_logs_alone():
    assert clip_log_tail("short\n") == "short\n"
    assert clip_log_tail("ab" * 10, limit=5) == "babab"


def test_a_flood_in_small_chunks_keeps_the_end_and_counts_every_character():
    tail = LogTail([SECRET])
    line = "x" * 999 + "\n"
    for _ in range(8 * 1024):  # 8 MB
        tail.write(line)
    tail.write("END-MARKER\n")
    tail.close()
    assert tail.size == 8 * 1024 * 1000 + len("END-MARKER\n")
    assert tail.text().endswith(line + "END-MARKER\n")
    assert len(tail.text().encode()) == 16 * 1024


def test_a_single_chunk_larger_than_the_tail_keeps_its_end():
    tail = LogTail([])
    tail.write("a" * 100_000 + "END")
    assert tail.text() == "a" * (16 * 1024 - 3) + "END" and tail.size == 100_003


def test_pump_keeps_a_character_split_across_chunks_whole_and_closes_the_tail():
    tail = LogTail([])
    data = "naïve ✓\n".encode()
    pump([data[:3], data[3:9], data[9:]], tail)
    assert tail.text() == "naïve ✓\n" and tail.size == len("naïve ✓\n")
