"""What a task's Dockerfile may name, fetch and unpack (`sandboxes.taskpolicy`), read before
any step is built: the rules one by one, without the engine."""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import random
import tarfile

import pytest

from sandboxes import taskbuild
from sandboxes.taskpolicy import Policy, Refused, canonical, vet

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
    assert "ADD --checksum=sha256:00 is not supported" in refused(
        f"FROM {BASE}\nADD --checksum=sha256:00 a /a\n", {"a": b"x"}
    )


NOISE_TAR = tar_bytes({"noise": random.Random(1).randbytes(64 * 1024)})


def half(data: bytes) -> bytes:
    return data[: len(data) // 2]


def zeros_tar(size: int, mode: str) -> bytes:
    """A tar holding one file of `size` zero bytes, compressed by `mode`."""
    return tar_bytes({"zeros": b"\0" * size}, mode=mode)


def sent(dockerfile: str, files: dict[str, bytes] | None = None) -> list[str]:
    context = tar_bytes({"Dockerfile": dockerfile.encode(), **(files or {})})
    return [step.text for step in vet(dockerfile, taskbuild.sent_context(context), POLICY)]


@pytest.mark.parametrize(
    "archive",
    [
        zeros_tar(4096, "w"),
        zeros_tar(4096, "w:gz"),
        zeros_tar(4096, "w:bz2"),
        zeros_tar(4096, "w:xz"),
        b"\x28\xb5\x2f\xfd" + b"\0" * 64,
        half(gzip.compress(NOISE_TAR)),
        half(lzma.compress(NOISE_TAR)),
        half(NOISE_TAR),
    ],
    ids=["tar", "gzip", "bzip2", "xz", "zstd", "truncated-gzip", "truncated-xz", "truncated-tar"],
)
def test_add_of_an_archive_is_refused_pointing_at_copy_and_a_run_step(archive):
    for source in ("a.tar.x", "./a.tar.x", "d/../a.tar.x", "a.tar*", "/a.tar.?"):
        message = refused(f"FROM {BASE}\nADD {source} /a/\n", {"a.tar.x": archive})

        assert (
            "a.tar.x is an archive" in message and "COPY it and unpack it in a RUN step" in message
        )


def test_an_archive_of_3_gib_in_a_few_bytes_is_refused_without_unpacking_it():
    header = tarfile.TarInfo("huge")
    header.size = 3 * 2**30  # 3 GiB declared, none of it sent
    archive = gzip.compress(header.tobuf(format=tarfile.GNU_FORMAT))

    assert "h.tgz is an archive" in refused(f"FROM {BASE}\nADD h.tgz /h/\n", {"h.tgz": archive})


def test_every_other_add_is_sent_as_copy_so_the_engine_unpacks_nothing():
    files = {
        "plain.bin": b"\0" * 4096,  # not an archive: copied as it is
        "dir/inner.tgz": zeros_tar(4096, "w:gz"),  # in a directory ADD: not unpacked anyway
        "compressed.gz": gzip.compress(b"not a tar"),
        "bz.bin": bz2.compress(b"") + bz2.compress(zeros_tar(4096, "w")),  # read as no tar here
    }

    assert sent(
        f"FROM {BASE}\nADD --chown=1000:1000 plain.bin /p\nADD dir /d/\nADD compressed.gz /g\n"
        "ADD bz.bin /b\n",
        files,
    )[1:] == [
        'COPY --chown=1000:1000 ["plain.bin", "/p"]',
        'COPY ["dir", "/d/"]',
        'COPY ["compressed.gz", "/g"]',
        'COPY ["bz.bin", "/b"]',  # were it an archive here, COPY still does not unpack it
    ]


def test_from_copy_and_add_are_sent_as_the_platform_read_them():
    steps = sent(
        f"ARG B={BASE}\nARG D=/app\nFROM ${{B}} AS Build\nARG D\nENV E=e\n"
        'COPY --from=build a${E}.txt $D/\nADD ["x y.txt", "/z"]\nRUN echo $D\n',
        {"ae.txt": b"a", "x y.txt": b"x"},
    )

    assert steps == [
        f"ARG B={BASE}",
        "ARG D=/app",
        f"FROM {BASE} AS build",
        "ARG D",
        "ENV E=e",
        'COPY --from=build ["ae.txt", "/app/"]',
        'COPY ["x y.txt", "/z"]',
        "RUN echo $D",  # a RUN runs in the platform's container, never by the engine
    ]


@pytest.mark.parametrize(
    ("dockerfile", "why"),
    [
        (f"FROM {BASE}\nADD\thttp://127.0.0.1:9/m /got\n", "ADD from a URL"),
        (f"FROM {BASE}\nCOPY\t--from=victim:1 /s /s\n", "COPY --from victim:1: not an allowed"),
        ("FROM\tvictim:1\n", "FROM victim:1: not an allowed"),
        (f'FROM {BASE}\nADD "http://127.0.0.1:9/m" /got\n', "ADD from a URL"),
        (f"FROM {BASE}\nADD h\\ttp://127.0.0.1:9/m /got\n", "ADD from a URL"),
        (f"FROM {BASE}\nADD a\\.txt /got\n", "quotes, escapes"),
        (f'FROM {BASE}\nCOPY --"from"=victim:1 /s /s\n', 'COPY --"from"=victim:1 is not'),
        (f"FROM {BASE}\nCOPY --fr\\om=victim:1 /s /s\n", "is not supported"),
        (f"FROM {BASE}\nCOPY --chown=0\t--from=victim:1 /s /s\n", "is not supported"),
        (f"FROM {BASE}\nCOPY --from=127.0.0.1:5000/x:1 /a /b\n", "not an allowed base"),
        (f'FROM {BASE}\nADD "a.txt" /x/\n', "quotes, escapes"),
        (f"FROM {BASE}\nADD a[^x].txt /x/\n", "a [ ] pattern"),
        (f"# escape=`\nFROM {BASE}\nADD \\\nhttp://127.0.0.1:9/m /got\n", "trailing escape"),
        (f"FROM {BASE}\nLABEL a=\x01b\n", "a control character"),
        (f"FROM {BASE}\nONBUILD\tRUN true\n", "ONBUILD is not supported"),
        (f"FROM {BASE}\nPULL victim:1\n", "PULL is not a Dockerfile instruction"),
        (f"FROM {BASE}\nCOPY <<EOF /x\nhi\nEOF\n", "heredocs are supported in RUN only"),
        (f"FROM {BASE} AS a b\n", "FROM takes an image"),
        (f"FROM {BASE}\nENV U=http://127.0.0.1:9/m\nFROM 0\nADD $U /got\n", "quotes, escapes"),
    ],
    ids=lambda value: value if len(value) < 30 else None,
)
def test_what_the_engine_would_read_otherwise_than_the_platform_is_refused(dockerfile, why):
    assert why in refused(dockerfile, {"a.txt": b"a", "a^.txt": b"b"})


def test_what_dockerignore_excludes_is_not_looked_at():
    files = {".dockerignore": b"big.tgz\n", "big.tgz": zeros_tar(4096, "w:gz")}

    check(f"FROM {BASE}\nADD *.tgz /a/\n", files)
