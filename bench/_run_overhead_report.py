"""What bench/run_overhead.py prints: the medians, the overhead against its target, the
platform's time per step and the runtimes side by side."""

from __future__ import annotations

from _common import median, ms, table

TARGET_OVERHEAD_S = 1.0


def report(platform: list[dict], baseline: list[dict]) -> None:
    p_tot = [r["total"] for r in platform]
    b_tot = [r["total"] for r in baseline]
    pm, bm = median(p_tot), median(b_tot)
    paired = median([p - b for p, b in zip(p_tot, b_tot, strict=True)])
    n = len(platform)
    print()
    print(f"Launch-to-finish of a trivial harness, {n} runs each after 1 warm-up (ms):")
    print(
        table(
            [
                ["platform (run_launch + execute_run)", ms(pm), ms(min(p_tot)), ms(max(p_tot))],
                ["baseline (git clone + docker run -v)", ms(bm), ms(min(b_tot)), ms(max(b_tot))],
            ],
            ["path", "median", "min", "max"],
        )
    )
    overhead = pm - bm
    print()
    print(f"ratio platform/baseline (medians): {pm / bm:.2f}x")
    print(
        f"platform overhead per run: {overhead * 1000:.0f} ms (median of paired differences: {paired * 1000:.0f} ms)"
    )
    verdict = "PASS" if overhead < TARGET_OVERHEAD_S else "MISS"
    print(f"target: under {TARGET_OVERHEAD_S * 1000:.0f} ms of overhead per run -> {verdict}")

    def breakdown(runs: list[dict], order: list[str]) -> list[list[str]]:
        keys = order + sorted({k for r in runs for k in r} - set(order) - {"total"})
        return [
            [k, ms(median([r.get(k, 0.0) for r in runs]))]
            for k in keys
            if any(k in r for r in runs)
        ]

    print()
    print("Platform time, median per step (ms; nested steps are indented by their prefix):")
    order = [
        "launch (run_launch)", "launch: sandbox engine ping", "launch: git ls-remote", "launch: django-q2 enqueue",
        "execute_run", "exec: claim run", "exec: decrypt secrets",
        "exec: clone (init/fetch/checkout, drop .git)", "exec: rmtree (work dir)", "exec: tar workspace",
        "exec: launch (create, copy, attach, start)", "sandbox: quota volume (a spare, or copy + mount)",
        "sandbox: container create", "sandbox: put_archive",
        "exec: follow (output, wait)", "follow: backend.wait (own thread)", "follow: exit -> wait returned",
        "follow: the entrypoint's exit record", "follow: exit -> exit record read",
        "exec: finish (collect, judge, record)", "finish: collect stage + results.json",
        "finish: run_finish (DB, revoke key)",
        "exec: kill", "exec: container remove", "exec: cleanup after run_finish",
        "in container (StartedAt -> FinishedAt)", "launch -> run marked succeeded",
    ]  # fmt: skip
    rows = breakdown(platform, order)
    known = {
        "launch (run_launch)": [
            "launch: sandbox engine ping", "launch: git ls-remote", "launch: django-q2 enqueue"
        ],
        "execute_run": [
            k for k in order if k.startswith("exec: ") and k != "exec: cleanup after run_finish"
        ],
        "exec: launch (create, copy, attach, start)": [
            "sandbox: quota volume (a spare, or copy + mount)", "sandbox: container create",
            "sandbox: put_archive",
        ],
        "exec: follow (output, wait)": ["follow: the entrypoint's exit record"],
        "exec: finish (collect, judge, record)": [
            "finish: collect stage + results.json", "finish: run_finish (DB, revoke key)"
        ],
    }  # fmt: skip
    for parent, parts in known.items():
        rest = median([r.get(parent, 0.0) - sum(r.get(p, 0.0) for p in parts) for r in platform])
        label = {
            "launch (run_launch)": "launch: other (checks, caps, Run + key, DB)",
            "execute_run": "exec: other (DB writes/reads, env, docker client)",
            "exec: launch (create, copy, attach, start)": "sandbox: other (attach, start)",
            "exec: follow (output, wait)": "follow: other (threads, draining the output, status)",
            "exec: finish (collect, judge, record)": "finish: other (judging, notes)",
        }[parent]
        rows.append([label, ms(rest)])
    print(table(rows, ["step", "median"]))
    print()
    print("Baseline time, median per step (ms):")
    print(table(breakdown(baseline, []), ["step", "median"]))
    pin = median([r.get("in container (StartedAt -> FinishedAt)", 0.0) for r in platform])
    bin_ = median([r.get("in container (StartedAt -> FinishedAt)", 0.0) for r in baseline])
    print()
    print(
        f"time inside the container: platform {pin * 1000:.0f} ms, baseline {bin_ * 1000:.0f} ms; "
        f"outside it: platform {(pm - pin) * 1000:.0f} ms, baseline {(bm - bin_) * 1000:.0f} ms"
    )


def side_by_side(platform: dict[str, list[dict]], baseline: dict[str, list[dict]]) -> None:
    """The runtimes next to each other: medians of both paths and the platform's overhead."""
    rows = []
    first = next(iter(platform))
    for runtime in platform:
        p = median([r["total"] for r in platform[runtime]])
        b = median([r["total"] for r in baseline[runtime]])
        inside = median(
            [r.get("in container (StartedAt -> FinishedAt)", 0.0) for r in platform[runtime]]
        )
        ref = median([r["total"] for r in platform[first]])
        rows.append([runtime, ms(p), ms(b), ms(p - b), ms(inside), f"{p / ref:.2f}x"])
    print()
    print("Side by side (ms, medians):")
    header = ["runtime", "platform", "baseline", "overhead", "in container", f"vs {first}"]
    print(table(rows, header))
