"""LoRA adapter zips: the streamed-size guard on uploads and the checks on the zip itself.

Nothing here reads a whole file: the upload handler counts bytes as they stream past, and
the zip is checked from its central directory with `zipfile` on the file object (only
adapter_config.json, capped, is read).
"""

import json
import posixpath
import stat
import zipfile
from typing import BinaryIO

from django.conf import settings
from django.core.files.uploadhandler import FileUploadHandler, SkipFile

from belvedir.errors import Invalid
from belvedir.text import size_text

CONFIG_NAME = "adapter_config.json"
WEIGHT_NAMES = ("adapter_model.safetensors", "adapter_model.bin")
CONFIG_MAX_BYTES = 1024 * 1024
# A member this many times larger unpacked than packed (and past BOMB_MIN_BYTES) is a bomb.
BOMB_RATIO = 200
BOMB_MIN_BYTES = 16 * 1024 * 1024
FIELD = "adapter"
# A PEFT adapter is a handful of files; the count is read from the end record before
# `zipfile` builds an object per member (a 2 GiB zip of empty members would be millions).
MAX_MEMBERS = 10_000


def max_bytes() -> int:
    return settings.BELVEDIR_ADAPTER_MAX_BYTES


def too_large_message(size: int | None = None) -> str:
    limit = size_text(max_bytes())
    shown = f" ({size_text(size)})" if size else ""
    return (
        f"The adapter zip{shown} is over the {limit} limit (BELVEDIR_ADAPTER_MAX_BYTES); "
        "upload a smaller adapter."
    )


class AdapterSizeLimit(FileUploadHandler):
    """Skips an uploaded file as soon as it passes the limit (nothing more is written for it)
    and remembers that it did, so the view can say why the file is missing."""

    def __init__(self, request=None):
        super().__init__(request)
        self.received = 0
        self.exceeded = False

    def new_file(self, *args, **kwargs):
        super().new_file(*args, **kwargs)
        self.received = 0

    def receive_data_chunk(self, raw_data, start):
        self.received += len(raw_data)
        if self.received > max_bytes():
            self.exceeded = True
            raise SkipFile()
        return raw_data

    def file_complete(self, file_size):
        return None


def guard_upload(request) -> AdapterSizeLimit:
    """Put the size guard in front of `request`'s upload handlers (before its body is read)."""
    guard = AdapterSizeLimit(request)
    request.upload_handlers.insert(0, guard)
    return guard


def _unsafe_name(name: str) -> bool:
    parts = name.replace("\\", "/").split("/")
    return (
        name.startswith(("/", "\\"))
        or (len(name) > 1 and name[1] == ":")
        or any(part == ".." for part in parts)
        or "\x00" in name
    )


def validate_adapter_zip(file: BinaryIO, *, size: int) -> dict:
    """Check an adapter zip from its central directory; Invalid(field="adapter") names what
    is wrong. Returns the parsed adapter_config.json."""
    if size > max_bytes():
        raise Invalid(too_large_message(size), field=FIELD, code="adapter_too_large")
    if size == 0:
        raise Invalid("The adapter file is empty: upload a zip.", field=FIELD, code="adapter_empty")
    not_zip = Invalid(
        "The adapter is not a zip file: upload a .zip holding adapter_config.json and "
        "adapter_model.safetensors (or adapter_model.bin).",
        field=FIELD,
        code="adapter_not_zip",
    )
    file.seek(0)
    try:
        end = zipfile._EndRecData(file)  # the end record only: 22 bytes (+ comment, zip64)
    except (OSError, ValueError, zipfile.BadZipFile):
        end = None
    if not end:
        raise not_zip
    if end[zipfile._ECD_ENTRIES_TOTAL] > MAX_MEMBERS:
        raise Invalid(
            f"The adapter zip holds {end[zipfile._ECD_ENTRIES_TOTAL]:,} files, over the "
            f"{MAX_MEMBERS:,} an adapter may hold.",
            field=FIELD,
            code="adapter_too_many_files",
        )
    file.seek(0)
    try:
        archive = zipfile.ZipFile(file)
    except (zipfile.BadZipFile, OSError, ValueError):
        raise not_zip from None
    with archive:
        infos = archive.infolist()
        if len(infos) > MAX_MEMBERS:  # the end record undercounted
            raise Invalid(
                f"The adapter zip holds over the {MAX_MEMBERS:,} files an adapter may hold.",
                field=FIELD,
                code="adapter_too_many_files",
            )
        seen: set[str] = set()
        for info in infos:
            if _unsafe_name(info.filename):
                raise Invalid(
                    f"The adapter zip holds an unsafe path {info.filename!r} (absolute, or "
                    "with ..): paths must stay inside the archive.",
                    field=FIELD,
                    code="adapter_unsafe_path",
                )
            if stat.S_ISLNK(info.external_attr >> 16):
                raise Invalid(
                    f"The adapter zip holds a symbolic link {info.filename!r}: an adapter "
                    "holds plain files only (unpacked, a link could point anywhere).",
                    field=FIELD,
                    code="adapter_symlink",
                )
            key = posixpath.normpath(info.filename.replace("\\", "/"))
            if key in seen:
                raise Invalid(
                    f"The adapter zip holds {info.filename!r} twice: which one a harness "
                    "unpacks would depend on its unzip.",
                    field=FIELD,
                    code="adapter_duplicate_name",
                )
            seen.add(key)
        total = sum(info.file_size for info in infos)
        if total > max_bytes():
            raise Invalid(
                f"The adapter zip unpacks to {size_text(total)}, over the "
                f"{size_text(max_bytes())} limit (BELVEDIR_ADAPTER_MAX_BYTES).",
                field=FIELD,
                code="adapter_too_large",
            )
        for info in infos:
            packed = max(info.compress_size, 1)
            if info.file_size > BOMB_MIN_BYTES and info.file_size / packed > BOMB_RATIO:
                raise Invalid(
                    f"The adapter zip looks like a zip bomb: {info.filename!r} unpacks "
                    f"{info.file_size // packed}× larger than it is packed.",
                    field=FIELD,
                    code="adapter_zip_bomb",
                )
        names = {info.filename.lstrip("./"): info for info in infos if not info.is_dir()}
        config_info = _find(names, CONFIG_NAME)
        if config_info is None:
            raise Invalid(
                f"The adapter zip has no {CONFIG_NAME} (the PEFT adapter's configuration).",
                field=FIELD,
                code="adapter_no_config",
            )
        if not any(_find(names, weights) for weights in WEIGHT_NAMES):
            raise Invalid(
                "The adapter zip has no adapter weights: adapter_model.safetensors or "
                "adapter_model.bin.",
                field=FIELD,
                code="adapter_no_weights",
            )
        if config_info.file_size > CONFIG_MAX_BYTES:
            raise Invalid(
                f"{CONFIG_NAME} is over {size_text(CONFIG_MAX_BYTES, iec=False)}.",
                field=FIELD,
                code="adapter_config",
            )
        try:
            with archive.open(config_info) as handle:
                config = json.loads(handle.read(CONFIG_MAX_BYTES + 1).decode("utf-8"))
        except (ValueError, UnicodeDecodeError, zipfile.BadZipFile, RuntimeError, EOFError):
            raise Invalid(
                f"{CONFIG_NAME} in the adapter zip is not valid JSON (or cannot be unpacked).",
                field=FIELD,
                code="adapter_config",
            ) from None
    if not isinstance(config, dict):
        raise Invalid(f"{CONFIG_NAME} must hold a JSON object.", field=FIELD, code="adapter_config")
    return config


def _find(names: dict, wanted: str):
    """The member named `wanted` at the top, or in the archive's one top folder."""
    if wanted in names:
        return names[wanted]
    for name, info in names.items():
        if name.count("/") == 1 and name.endswith("/" + wanted):
            return info
    return None
