"""An attacker's harness: tries to reach what a sandbox must not, and the platform it must.

Reads PROBE_TARGETS (JSON [[label, host, port], ...]) and PROBE_WRITE_BYTES from its env,
writes what it found to results.json (score 1.0 whatever happened: the test judges).
"""

import concurrent.futures
import json
import os
import socket
import urllib.error
import urllib.request


def connect(target):
    label, host, port = target
    try:
        with socket.create_connection((host, port), timeout=3) as sock:
            sock.settimeout(3)
            sock.sendall(b"PING\r\n")
            try:
                data = sock.recv(64)
            except OSError:
                data = b""
            return label, f"open: {data[:20]!r}"
    except OSError as exc:
        return label, f"blocked: {exc.__class__.__name__}"


def fetch(path, method="GET", body=None):
    base = os.environ["BELVEDIR_BASE_URL"].rstrip("/")
    request = urllib.request.Request(
        base + path,
        data=body,
        method=method,
        headers={
            "Authorization": "Bearer " + os.environ["BELVEDIR_API_KEY"],
            "Content-Type": "application/json",
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode(errors="replace")[:2000]
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")[:300]
    except OSError as exc:
        return 0, f"{exc.__class__.__name__}: {exc}"


def try_write(path):
    try:
        with open(path, "w") as handle:
            handle.write("x")
        return "written"
    except OSError as exc:
        return f"refused: {exc.strerror}"


def main():
    targets = json.loads(os.environ.get("PROBE_TARGETS", "[]"))
    with concurrent.futures.ThreadPoolExecutor(max_workers=32) as pool:
        reached = dict(pool.map(connect, targets))
    run_id = os.environ["BELVEDIR_RUN_ID"]
    tasks_status, tasks_body = fetch(f"/api/v1/runs/{run_id}/tasks")
    outcome_status, _ = fetch(
        "/api/v1/outcomes",
        "POST",
        json.dumps({"session_id": run_id, "outcome": "success"}).encode(),
    )
    admin_status, _ = fetch("/admin/")
    keys_status, _ = fetch("/api/v1/keys")
    found = {
        "connections": reached,
        "tasks": [tasks_status, tasks_body],
        "outcome_status": outcome_status,
        "admin_status": admin_status,
        "keys_status": keys_status,
        "docker_socket": os.path.exists("/var/run/docker.sock")
        or os.path.exists("/run/docker.sock"),
        "writes": {path: try_write(path) for path in ["/etc/probe", "/usr/probe", "/probe"]},
    }
    print(json.dumps(found, indent=1), flush=True)
    with open("results.json", "w") as handle:
        json.dump({"score": 1.0, "probe": found}, handle)


if __name__ == "__main__":
    main()
