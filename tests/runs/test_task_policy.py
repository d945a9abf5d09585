"""What a task's Dockerfile may name, fetch and unpack (`runs.sandbox.taskpolicy`), read before
any step is built: the rules one by one, without the engine."""

from __future__ import annotations

import gzip
import io
import lzma
import random
import tarfile

import pytest

from runs.sandbox import taskbuild
from runs.sandbox.taskpolicy import Policy, Refused, canonical, vet

BASE = "belvedir-sandbox:latest"
POLICY = Policy(bases=(BASE, "python:3.13-slim"), disk=64 * 2**20)


def tar_bytes(files: dict[str, bytes], mode: str = "w") -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode=mode) as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def check(dockerfile: str, files: dict[str, bytes] | None = None, policy: Policy = POLICY):
    context = tar_bytes({"Dockerfile": dockerfile.encode(), **(files or {})})
    vet(dockerfile, taskbuild.sent_context(context), policy)


def refused(dockerfile: str, files: dict[str, bytes] | None = None, policy=POLICY) -> str:
    with pytest.raises(Refused) as caught:
        check(dockerfile, files, policy)
    return str(caught.value)


def test_an_image_name_is_read_as_the_engine_resolves_it():
    assert canonical("belvedir-sandbox") == "belvedir-sandbox:latest"
    assert canonical("docker.io/library/python:3.13-slim") == "python:3.13-slim"
    assert canonical("docker.io/me/img") == "me/img:latest"
    assert canonical("127.0.0.1:5000/img") == "127.0.0.1:5000/img:latest"
    assert POLICY.allows("belvedir-sandbox") and POLICY.allows("docker.io/library/python:3.13-slim")
    assert not POLICY.allows("python:3.12-slim") and not POLICY.allows("belvedir-task:abc")


def test_the_builds_own_stages_scratch_and_the_allowed_bases_may_be_named():
    check(
        f"ARG B={BASE}\nFROM $B AS Build\nRUN true\nFROM build AS second\nFROM scratch\n"
        "COPY --from=BUILD /a /a\nCOPY --from=0 /b /b\nCOPY --from=python:3.13-slim /c /c\n"
        f"FROM belvedir-sandbox\n"
    )


@pytest.mark.parametrize(
    ("dockerfile", "named"),
    [
        ("FROM belvedir-task:0123456789abcdef\n", "FROM belvedir-task:0123456789abcdef: not an"),
        ("ARG B=postgres:16\nFROM ${B}\n", "FROM postgres:16: not an allowed base image"),
        ("FROM 3f2a9c1d7e6b\n", "FROM 3f2a9c1d7e6b: an image id or digest is not accepted"),
        (f"FROM sha256:{'a' * 64}\n", "an image id or digest"),
        (f"FROM {BASE}@sha256:{'b' * 64}\n", "an image id or digest"),
        (f"FROM {BASE}\nCOPY --from=belvedir-task:x /a /a\n", "COPY --from belvedir-task:x"),
        (f"FROM {BASE}\nCOPY --from=later /a /a\nFROM {BASE} AS later\n", "--from later"),
        (f"FROM {BASE}\nARG S=0\nCOPY --from=$S /a /a\n", "a variable in COPY --from"),
    ],
)
def test_an_image_outside_the_stages_and_the_allow_list_is_refused_naming_it(dockerfile, named):
    message = refused(dockerfile)

    assert named in message
    assert message.startswith("step ")


def test_the_refusal_lists_the_allowed_bases():
    message = refused("FROM ubuntu:24.04\n")

    assert "BELVEDIR_TASK_BASE_IMAGES: belvedir-sandbox:latest, python:3.13-slim" in message


@pytest.mark.parametrize(
    "add",
    [
        "ADD http://169.254.169.254/latest/meta-data/ /m",
        "ADD https://example.org/a.tar.gz /a",
        "ADD --chown=1000 http://127.0.0.1:8000/admin/login/ /x",
        'ADD ["http://127.0.0.1/x", "/x"]',
        "ADD git@github.com:org/repo.git /repo",
        "ADD file.txt http://127.0.0.1/also-a-source /dest/",
        "ENV U=http://127.0.0.1/x\nADD ${U} /x",
    ],
)
def test_add_from_a_url_is_refused_pointing_at_a_run_step(add):
    message = refused(f"FROM {BASE}\n{add}\n", {"file.txt": b"x"})

    assert "ADD from a URL is not supported" in message and "RUN step" in message


def test_an_unknown_add_flag_is_refused_naming_it():
    assert "ADD --unpack-everywhere is not supported" in refused(
        f"FROM {BASE}\nADD --unpack-everywhere a /a\n", {"a": b"x"}
    )


NOISE_TAR = tar_bytes({"noise": random.Random(1).randbytes(64 * 1024)})


def half(data: bytes) -> bytes:
    return data[: len(data) // 2]


def zeros_tar(size: int, mode: str) -> bytes:
    """A tar holding one file of `size` zero bytes, compressed by `mode`."""
    return tar_bytes({"zeros": b"\0" * size}, mode=mode)


@pytest.mark.parametrize("mode", ["w", "w:gz", "w:bz2", "w:xz"])
def test_what_add_archives_unpack_to_counts_against_the_disk_limit(mode):
    policy = Policy(bases=(BASE,), disk=2**20)
    archive = zeros_tar(2**20 + 1, mode)

    message = refused(f"FROM {BASE}\nADD a.tar* /a/\n", {"a.tar.x": archive}, policy)

    assert "step 2 (ADD a.tar* /a/): its archives unpack to more than the 1 MiB" in message
    check(f"FROM {BASE}\nADD a.tar* /a/\n", {"a.tar.x": zeros_tar(2**19, mode)}, policy)


def test_the_archives_of_every_add_count_together():
    policy = Policy(bases=(BASE,), disk=2**20)
    half = zeros_tar(600 * 1024, "w:gz")

    message = refused(
        f"FROM {BASE}\nADD a.tgz /a/\nADD b.tgz /b/\n", {"a.tgz": half, "b.tgz": half}, policy
    )

    assert message.startswith("step 3 (ADD b.tgz /b/)")


def test_an_archive_is_measured_by_its_headers_without_unpacking_it():
    header = tarfile.TarInfo("huge")
    header.size = 3 * 2**30  # 3 GiB declared, none of it sent
    archive = gzip.compress(header.tobuf(format=tarfile.GNU_FORMAT))

    message = refused(f"FROM {BASE}\nADD h.tgz /h/\n", {"h.tgz": archive})

    assert "unpack to more than the 64 MiB" in message


def test_files_the_builder_copies_as_they_are_do_not_count():
    policy = Policy(bases=(BASE,), disk=2**20)
    files = {
        "plain.bin": b"\0" * (2 * 2**20),  # not an archive: copied as it is (the layer counts)
        "dir/inner.tgz": zeros_tar(2 * 2**20, "w:gz"),  # in a directory ADD: not unpacked
        "copied.tgz": zeros_tar(2 * 2**20, "w:gz"),  # COPY never unpacks
        "compressed.gz": gzip.compress(b"not a tar"),
    }

    check(
        f"FROM {BASE}\nADD plain.bin /p\nADD dir /d/\nCOPY copied.tgz /c/\nADD compressed.gz /g\n",
        files,
        policy,
    )


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"\x28\xb5\x2f\xfd" + b"\0" * 64, "zstd-compressed"),
        (half(gzip.compress(NOISE_TAR)), "could not be read as an archive"),
        (half(lzma.compress(NOISE_TAR)), "could not be read as an archive"),
        (half(NOISE_TAR), "could not be read as an archive"),
    ],
    ids=["zstd", "truncated-gzip", "truncated-xz", "truncated-tar"],
)
def test_an_archive_the_builder_would_unpack_but_cannot_be_measured_is_refused(data, why):
    assert why in refused(f"FROM {BASE}\nADD a /a/\n", {"a": data})


def test_what_dockerignore_excludes_is_not_measured():
    policy = Policy(bases=(BASE,), disk=2**20)
    files = {".dockerignore": b"big.tgz\n", "big.tgz": zeros_tar(2 * 2**20, "w:gz")}

    check(f"FROM {BASE}\nADD *.tgz /a/\n", files, policy)
