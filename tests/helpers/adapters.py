"""LoRA adapter zips for tests: a small valid one, and the broken shapes validation refuses."""

import io
import json
import zipfile
from pathlib import Path

CONFIG = {"peft_type": "LORA", "r": 8, "lora_alpha": 16, "target_modules": ["q_proj", "v_proj"]}


def adapter_zip_bytes(
    members: dict[str, bytes] | None = None, *, compression=zipfile.ZIP_DEFLATED
) -> bytes:
    """A zip of `members` (default: a valid PEFT adapter: config + safetensors weights)."""
    if members is None:
        members = {
            "adapter_config.json": json.dumps(CONFIG).encode(),
            "adapter_model.safetensors": b"\x08\x00\x00\x00\x00\x00\x00\x00{}      " + bytes(2048),
        }
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=compression) as archive:
        for name, data in members.items():
            # A fixed date: the same members make the same bytes.
            info = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))
            archive.writestr(info, data, compress_type=compression)
    return buffer.getvalue()


def write_adapter_zip(path: Path, members: dict[str, bytes] | None = None) -> Path:
    path.write_bytes(adapter_zip_bytes(members))
    return path
