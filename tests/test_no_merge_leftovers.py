"""No tracked file keeps a merge's conflict markers (a README once shipped both sides)."""

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MARKER = re.compile(r"^(<{7} |>{7} |={7}$)", re.MULTILINE)
TEXT = (".py", ".md", ".html", ".txt", ".toml", ".sh", ".yml", ".yaml", ".cfg", ".ini", ".js")


def test_no_tracked_text_file_holds_conflict_markers():
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    offenders = []
    for name in filter(None, listed.split("\0")):
        path = ROOT / name
        if not name.endswith(TEXT) or not path.is_file():
            continue
        if MARKER.search(path.read_text(errors="replace")):
            offenders.append(name)
    assert offenders == []
