"""Adapter zips are checked from their central directory; each refusal names what is wrong."""

import io
import json
import stat
import warnings
import zipfile

import pytest

from belvedir.errors import Invalid
from models_registry.adapters import validate_adapter_zip
from tests.helpers.adapters import CONFIG, adapter_zip_bytes

CONFIG_BYTES = json.dumps(CONFIG).encode()
WEIGHTS = bytes(4096)


def bomb() -> bytes:
    """A 64 MiB member of zeros, deflated to a few KB."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("adapter_config.json", CONFIG_BYTES)
        with archive.open("adapter_model.safetensors", "w", force_zip64=True) as member:
            for _ in range(64):
                member.write(bytes(2**20))
    return buffer.getvalue()


def traversal(name: str) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("adapter_config.json", CONFIG_BYTES)
        archive.writestr("adapter_model.safetensors", WEIGHTS)
        archive.writestr(zipfile.ZipInfo(name), b"x")
    return buffer.getvalue()


def symlink(name: str, target: str) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("adapter_config.json", CONFIG_BYTES)
        link = zipfile.ZipInfo(name)
        link.external_attr = (stat.S_IFLNK | 0o777) << 16
        archive.writestr(link, target)
        if name != "adapter_model.safetensors":
            archive.writestr("adapter_model.safetensors", WEIGHTS)
    return buffer.getvalue()


def duplicated(first: str, second: str) -> bytes:
    buffer = io.BytesIO()
    with warnings.catch_warnings(), zipfile.ZipFile(buffer, "w") as archive:
        warnings.simplefilter("ignore")  # zipfile warns of the duplicate it writes
        archive.writestr(first, CONFIG_BYTES)
        archive.writestr("adapter_model.safetensors", WEIGHTS)
        archive.writestr(second, b'{"evil": true}')
    return buffer.getvalue()


def many_files(count: int) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("adapter_config.json", CONFIG_BYTES)
        archive.writestr("adapter_model.safetensors", WEIGHTS)
        for index in range(count):
            archive.writestr(f"f/{index}", b"")
    return buffer.getvalue()


CASES = [
    ("not a zip", b"PK but not really a zip file" * 10, "adapter_not_zip", "not a zip file"),
    ("empty", b"", "adapter_empty", "empty"),
    (
        "no adapter_config.json",
        adapter_zip_bytes({"adapter_model.safetensors": WEIGHTS}),
        "adapter_no_config",
        "no adapter_config.json",
    ),
    (
        "no weights",
        adapter_zip_bytes({"adapter_config.json": CONFIG_BYTES, "README.md": b"hi"}),
        "adapter_no_weights",
        "adapter_model.safetensors or adapter_model.bin",
    ),
    (
        "config not JSON",
        adapter_zip_bytes({"adapter_config.json": b"{nope", "adapter_model.bin": WEIGHTS}),
        "adapter_config",
        "not valid JSON",
    ),
    ("zip bomb", bomb(), "adapter_zip_bomb", "zip bomb"),
    ("path with ..", traversal("../../etc/cron.d/evil"), "adapter_unsafe_path", "unsafe path"),
    ("absolute path", traversal("/etc/passwd"), "adapter_unsafe_path", "unsafe path"),
    ("windows drive", traversal("C:\\evil.dll"), "adapter_unsafe_path", "unsafe path"),
    ("backslash ..", traversal("a\\..\\..\\evil"), "adapter_unsafe_path", "unsafe path"),
    (
        "symlinked weights",
        symlink("adapter_model.safetensors", "/etc/shadow"),
        "adapter_symlink",
        "symbolic link 'adapter_model.safetensors'",
    ),
    ("symlink to a folder", symlink("up", "../../.."), "adapter_symlink", "symbolic link"),
    (
        "duplicate config",
        duplicated("adapter_config.json", "adapter_config.json"),
        "adapter_duplicate_name",
        "twice",
    ),
    (
        "duplicate via ./",
        duplicated("adapter_config.json", "./adapter_config.json"),
        "adapter_duplicate_name",
        "twice",
    ),
    ("too many files", many_files(10_001), "adapter_too_many_files", "10,000"),
]


@pytest.mark.parametrize(("case", "data", "code", "words"), CASES, ids=[c[0] for c in CASES])
def test_a_broken_adapter_zip_is_refused_naming_what_is_wrong(case, data, code, words):
    with pytest.raises(Invalid) as refused:
        validate_adapter_zip(io.BytesIO(data), size=len(data))
    assert refused.value.field == "adapter"
    assert refused.value.code == code
    assert words in refused.value.message


def test_a_zip_over_the_limit_is_refused_by_its_size(settings):
    settings.BELVEDIR_ADAPTER_MAX_BYTES = 4096
    data = adapter_zip_bytes()
    with pytest.raises(Invalid) as refused:
        validate_adapter_zip(io.BytesIO(data), size=5000)
    assert refused.value.code == "adapter_too_large"
    assert "BELVEDIR_ADAPTER_MAX_BYTES" in refused.value.message


def test_a_zip_unpacking_past_the_limit_is_refused(settings):
    settings.BELVEDIR_ADAPTER_MAX_BYTES = 64 * 1024
    data = adapter_zip_bytes(
        {"adapter_config.json": CONFIG_BYTES, "adapter_model.safetensors": bytes(200 * 1024)}
    )
    assert len(data) < settings.BELVEDIR_ADAPTER_MAX_BYTES
    with pytest.raises(Invalid) as refused:
        validate_adapter_zip(io.BytesIO(data), size=len(data))
    assert refused.value.code == "adapter_too_large"
    assert "unpacks to" in refused.value.message


@pytest.mark.parametrize(
    "members",
    [
        {"adapter_config.json": CONFIG_BYTES, "adapter_model.safetensors": WEIGHTS},
        {"adapter_config.json": CONFIG_BYTES, "adapter_model.bin": WEIGHTS},
        # PEFT's save_pretrained folder, zipped with its folder
        {"my-lora/adapter_config.json": CONFIG_BYTES, "my-lora/adapter_model.bin": WEIGHTS},
    ],
    ids=["safetensors", "bin", "in-a-folder"],
)
def test_a_peft_adapter_zip_passes_and_its_config_is_read(members):
    data = adapter_zip_bytes(members)
    assert validate_adapter_zip(io.BytesIO(data), size=len(data)) == CONFIG


def test_the_upload_guard_skips_a_file_once_it_streams_past_the_limit(settings):
    from django.core.files.uploadhandler import SkipFile

    from models_registry.adapters import AdapterSizeLimit

    settings.BELVEDIR_ADAPTER_MAX_BYTES = 10_000
    guard = AdapterSizeLimit()
    guard.new_file("adapter", "a.zip", "application/zip", None)
    assert guard.receive_data_chunk(b"x" * 6_000, 0) == b"x" * 6_000
    with pytest.raises(SkipFile):
        guard.receive_data_chunk(b"x" * 6_000, 6_000)
    assert guard.exceeded and guard.received == 12_000
