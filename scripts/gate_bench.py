"""Time and measure every op's quick gate: ``python3 scripts/gate_bench.py --out DIR [--runs 3]``.

Plan
----
1. Per run, per op (draft_topk, verify, verify_tree; ``--ops``), per checkout (this one, and the
   ``--before`` folder when given: interleaved, so both see the same load), the whole command
   ``python3 -m equiv gate --op OP --candidate SPEC --device D --json FILE`` runs from that
   checkout's root with ``PYTHONPATH`` set to it (its own ``equiv``, ``equiv.properties`` and
   ``equiv.reference``), Python's start included. ``--warmup`` runs before (default: one per op
   and checkout on a GPU, none on the CPU) are not counted.
2. While it runs, a thread polls every ``--poll-ms`` (150): ``nvidia-smi --query-compute-apps=
   pid,used_memory`` (when there is an nvidia-smi), summed over every process on the GPUs and
   over the gate's own process tree (the gate, its candidate's worker, the property suite's
   pytest process and its worker); and the resident memory of the gate's process tree from
   ``/proc`` (summed). The largest single process's host peak comes from ``wait4``.
3. From the gate's JSON: each stage's ``seconds`` and, where the checkout records them
   (``Stage.memory``, equiv.memory), each stage's torch peak over its processes; the gate's
   torch peak is the property suite's plus the largest other stage's (they run side by side).
4. The table (markdown): per op and checkout, medians over the runs (min-max beside the whole
   command), the stage times, the peaks, the verdicts; the machine (GPU or CPU model, cores,
   load average before and after) and each checkout's commit above it. ``DIR/gate_bench.md``,
   ``DIR/gate_bench.json`` (every run's record) and ``DIR/runs/`` (each gate's JSON and output).
5. Where the time goes: each gate runs with ``EQUIV_TIMELINE`` (``equiv.timeline``; a checkout
   without it writes nothing), and a second table gives, per op and checkout, the medians of
   when each phase began, in seconds after the command was started: the suite spawned, its
   pytest configured (its imports done), its tests done, the suite's process gone; the gate's
   first own stage begun, its last one ended; the command's end and the process's exit.
Exit status: 0 when every gate ran to a verdict (PASS or FAIL as it may be), 1 otherwise.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))                   # this checkout's equiv, installed or not
from equiv.timeline import read as read_marks  # noqa: E402  (the marks' one reader)
OPS = ("draft_topk", "verify", "verify_tree")
CANDIDATES = {"draft_topk": "softmax_topk", "verify": "torch_sampler", "verify_tree": "target_only"}
MiB = 2 ** 20


def _children(pid: int) -> dict:
    """``{pid: ppid}`` of every process (from /proc)."""
    out = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    out[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    return out


def tree_of(pid: int) -> set:
    """``pid`` and every process below it."""
    parent = _children(pid)
    tree, grown = {pid}, True
    while grown:
        more = {p for p, pp in parent.items() if pp in tree} - tree
        tree |= more
        grown = bool(more)
    return tree


def rss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, IndexError, ValueError):
        return 0


def gpu_apps() -> dict | None:
    """``{pid: used MiB}`` of the processes on the GPUs, or None without nvidia-smi."""
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        text = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                              capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    out = {}
    for line in text.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
            out[int(parts[0])] = out.get(int(parts[0]), 0) + int(parts[1])
    return out


def label_of(pid: int) -> str:
    """A process's command line, short: what it is (the gate, its suite, a worker)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return f"pid {pid}"
    words = [os.path.basename(a) if "/" in a else a for a in argv[:6]]
    return " ".join(words)[:80]


class Poller:
    """Peaks of a running gate (module docstring, step 2), polled in a thread."""

    def __init__(self, pid: int, every_s: float):
        self.pid, self.every_s = pid, every_s
        self.gpu_all = self.gpu_tree = None
        self.host_tree = 0
        self.gpu_processes = []          # [(MiB, label)] of the gate's processes at its GPU peak
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            tree = tree_of(self.pid)
            self.host_tree = max(self.host_tree, sum(rss_bytes(p) for p in tree))
            apps = gpu_apps()
            if apps is not None:
                self.gpu_all = max(self.gpu_all or 0, sum(apps.values()) * MiB)
                mine = {p: v for p, v in apps.items() if p in tree}
                if sum(mine.values()) * MiB > (self.gpu_tree or 0) or self.gpu_tree is None:
                    self.gpu_processes = sorted(((v, label_of(p)) for p, v in mine.items()), reverse=True)
                self.gpu_tree = max(self.gpu_tree or 0, sum(mine.values()) * MiB)
            self._stop.wait(self.every_s)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def json_peaks(doc: dict) -> tuple:
    """``(stage seconds, stage torch GPU peaks, gate torch GPU peak, gate host peak)`` from a
    gate's JSON (the peaks None where the checkout records none): a gate's peak is its property
    suite's plus its largest other stage's, as they run side by side."""
    stages = doc.get("stages", {})
    seconds = {name: st.get("seconds") for name, st in stages.items() if st.get("status") in ("pass", "FAIL")}

    def gate_peak(key):
        got = {name: (st.get("memory") or {}).get(key) for name, st in stages.items()}
        got = {k: v for k, v in got.items() if v is not None}
        others = [v for k, v in got.items() if k != "properties"]
        return got, (got.get("properties", 0) + (max(others) if others else 0)) if got else None
    gpu, gpu_peak = gate_peak("gpu_peak_bytes")
    return seconds, gpu, gpu_peak, gate_peak("host_peak_bytes")[1]


def run_gate(tree: Path, op: str, candidate: str, device: str, extra: list, out: Path, poll_s: float,
             timeout_s: float) -> dict:
    """One whole gate command from ``tree`` (module docstring, steps 1-3)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "equiv", "gate", "--op", op, "--candidate", candidate, "--device", device,
           "--json", str(out.with_suffix(".json")), *extra]
    marks = out.with_suffix(".timeline")
    marks.unlink(missing_ok=True)
    env = dict(os.environ, PYTHONPATH=str(tree) + (os.pathsep + os.environ["PYTHONPATH"]
                                                   if os.environ.get("PYTHONPATH") else ""), EQUIV_TIMELINE=str(marks))
    with open(out.with_suffix(".log"), "w") as log:
        epoch0 = time.time()
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=tree, env=env, stdout=log, stderr=subprocess.STDOUT)
        poller = Poller(proc.pid, poll_s)
        deadline = t0 + timeout_s
        status = rusage = None
        while status is None:
            pid, status, rusage = os.wait4(proc.pid, os.WNOHANG)
            if pid == 0:
                status = None
                if time.perf_counter() > deadline:
                    for p in tree_of(proc.pid):
                        try:
                            os.kill(p, 9)
                        except OSError:
                            pass
                time.sleep(0.05)
        wall = time.perf_counter() - t0
        poller.stop()
    rc = os.waitstatus_to_exitcode(status)
    proc.returncode = rc
    try:
        doc = json.loads(out.with_suffix(".json").read_text())
    except (OSError, ValueError):
        doc = {}
    seconds, stage_gpu, gate_gpu, gate_host = json_peaks(doc)
    return {"phases": dict(phases(marks, proc.pid, epoch0), exit=round(wall, 3)),"op": op, "candidate": candidate, "command": " ".join(cmd[1:]), "rc": rc, "wall_s": round(wall, 3),
            "verdict": doc.get("verdict") or ({True: "pass", False: "fail"}.get(doc.get("passed")) if doc else "none"),
            "stage_s": seconds, "stage_torch_gpu_bytes": stage_gpu, "torch_gpu_bytes": gate_gpu,
            "json_host_bytes": gate_host,
            "smi_gpu_all_bytes": poller.gpu_all, "smi_gpu_tree_bytes": poller.gpu_tree,
            "host_tree_bytes": poller.host_tree, "gpu_processes_at_peak": poller.gpu_processes, "host_largest_bytes": int(rusage.ru_maxrss) * 1024}


PHASES = ("suite spawned", "pytest configured", "pytest tests done", "suite exited", "stages start",
          "stages end", "command end", "exit")


def phases(path: Path, pid: int, epoch0: float) -> dict:
    """``{phase: seconds after the command started}`` from the marks a gate wrote
    (``equiv.timeline``; module docstring, step 5): a suite's phases from its last process to
    reach them (shards run side by side); the gate's own stages are those of its process, the
    property suite's excepted."""
    try:
        marks = read_marks(str(path))
    except OSError:
        return {}
    got: dict = {}
    for who, when, event in marks:
        at = round(when - epoch0, 3)
        own = who == pid
        if event in ("pytest configured", "pytest tests done") or (own and event in ("suite spawned", "suite exited",
                                                                                       "command end")):
            got[event] = max(got.get(event, at), at) if event != "suite spawned" else min(got.get(event, at), at)
        elif own and event.startswith("stage ") and "properties" not in event:
            key = "stages start" if event.endswith(" start") else "stages end"
            got[key] = min(got.get(key, at), at) if key == "stages start" else max(got.get(key, at), at)
    return got


def phase_table(records: list, labels: list, ops: list) -> list:
    """Medians of each phase's start (``phases``), per op and checkout (module docstring, step 5)."""
    head = ["op", "checkout"] + [f"{p} s" for p in PHASES]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for op in ops:
        for label in labels:
            rs = [r for r in records if r["op"] == op and r["checkout"] == label]
            if rs:
                cells = [op, label]
                for p in PHASES:
                    m = _median([r.get("phases", {}).get(p) for r in rs])
                    cells.append("-" if m is None else f"{m:.2f}")
                lines.append("| " + " | ".join(cells) + " |")
    return lines


def _commit(tree: Path) -> str:
    """The checkout's commit, or what it is when it is no checkout of its own (a ``git archive``
    folder inside another checkout would otherwise show the outer one's commit)."""
    if not (tree / ".git").exists():
        return "a folder without git metadata (no commit of its own)"

    def git(*a):
        return subprocess.run(["git", "-C", str(tree), *a], capture_output=True, text=True).stdout.strip()
    head = git("rev-parse", "--short", "HEAD") or "?"
    return head + (" + uncommitted changes" if git("status", "--porcelain", "--untracked-files=no") else "")


def machine(device: str) -> str:
    gpu = ""
    if device != "cpu" and shutil.which("nvidia-smi"):
        gpu = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader"],
                             capture_output=True, text=True).stdout.strip().replace("\n", "; ")
    cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), "?")
    cores = len(os.sched_getaffinity(0))
    return f"{gpu + ', ' if gpu else ''}{cpu}, {cores} cores"


def _gib(x) -> str:
    return "-" if x is None else f"{x / 2 ** 30:.2f}"


def _median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def table(records: list, labels: list, ops: list) -> list:
    stages = sorted({s for r in records for s in r["stage_s"]}, key=lambda s: (s != "properties", s))
    head = (["op", "checkout", "runs", "whole command s (median, min-max)"] + [f"{s} s" for s in stages]
            + ["GPU peak, every process (nvidia-smi) GiB", "GPU peak, gate's processes (nvidia-smi) GiB",
               "torch peak (JSON) GiB", "host peak, gate's processes GiB", "host peak (JSON) GiB",
               "host peak, largest process GiB",
               "verdicts"])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for op in ops:
        for label in labels:
            rs = [r for r in records if r["op"] == op and r["checkout"] == label]
            if not rs:
                continue
            walls = [r["wall_s"] for r in rs]
            cells = [op, label, str(len(rs)), f"{statistics.median(walls):.1f} ({min(walls):.1f}-{max(walls):.1f})"]
            for s in stages:
                m = _median([r["stage_s"].get(s) for r in rs])
                cells.append("-" if m is None else f"{m:.1f}")
            cells += [_gib(_median([r["smi_gpu_all_bytes"] for r in rs])), _gib(_median([r["smi_gpu_tree_bytes"] for r in rs])),
                      _gib(_median([r["torch_gpu_bytes"] for r in rs])), _gib(_median([r["host_tree_bytes"] for r in rs])),
                      _gib(_median([r.get("json_host_bytes") for r in rs])),
                      _gib(_median([r["host_largest_bytes"] for r in rs])),
                      ", ".join(f"{v} x{n}" for v, n in sorted(_count(r["verdict"] for r in rs).items()))]
            lines.append("| " + " | ".join(cells) + " |")
    return lines


def _count(items) -> dict:
    out = {}
    for x in items:
        out[x] = out.get(x, 0) + 1
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="folder for gate_bench.md, gate_bench.json and runs/")
    p.add_argument("--runs", type=int, default=3, help="counted runs per op and checkout (default 3)")
    p.add_argument("--warmup", type=int, default=None, help="uncounted runs first (default: 1 on a GPU, 0 on the CPU)")
    p.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    p.add_argument("--ops", default=",".join(OPS), help=f"comma-separated (default {','.join(OPS)})")
    p.add_argument("--candidate", action="append", default=[], metavar="OP=SPEC",
                   help="the candidate of an op (default " + ", ".join(f"{k}={v}" for k, v in CANDIDATES.items()) + ")")
    p.add_argument("--before", default=None, metavar="FOLDER", help="a second checkout, run interleaved with this one")
    p.add_argument("--gate-args", default="", help="more arguments for this checkout's gates, e.g. '--max-gpu-memory 8GiB'")
    p.add_argument("--before-gate-args", default="", help="more arguments for the --before checkout's gates")
    p.add_argument("--poll-ms", type=int, default=150, help="memory polling period (default 150)")
    p.add_argument("--timeout-s", type=float, default=900, help="per gate command (default 900)")
    args = p.parse_args(argv)
    ops = [o.strip() for o in args.ops.split(",") if o.strip()]
    bad = [o for o in ops if o not in OPS]
    if bad:
        p.error(f"--ops {','.join(bad)}: not an op; choose from {','.join(OPS)}")
    candidates = dict(CANDIDATES)
    for item in args.candidate:
        op, _, spec = item.partition("=")
        if op not in OPS or not spec:
            p.error(f"--candidate {item!r}: give OP=SPEC with OP one of {','.join(OPS)}")
        candidates[op] = spec
    device = args.device
    if device == "auto":
        device = "cuda" if gpu_apps() is not None else "cpu"
    trees = [("this", ROOT, args.gate_args.split())]
    if args.before:
        before = Path(args.before).resolve()
        if not (before / "equiv" / "__init__.py").is_file():
            p.error(f"--before {args.before!r}: no equiv/ checkout there")
        trees.append(("before", before, args.before_gate_args.split()))
    out = Path(args.out)
    (out / "runs").mkdir(parents=True, exist_ok=True)
    warmup = args.warmup if args.warmup is not None else (1 if device == "cuda" else 0)
    info = {"machine": machine(device), "device": device, "load_before": os.getloadavg(),
            "checkouts": {label: {"path": str(t), "commit": _commit(t), "gate_args": extra} for label, t, extra in trees},
            "runs": args.runs, "warmup": warmup, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    records = []
    for r in range(-warmup, args.runs):
        for op in ops:
            for label, tree, extra in trees:
                name = f"{label}-{op}-{'warmup' + str(-r) if r < 0 else r + 1}"
                rec = run_gate(tree, op, candidates[op], device, extra, out / "runs" / name, args.poll_ms / 1000,
                               args.timeout_s)
                rec.update(checkout=label, run=r + 1, warmup=r < 0)
                print(f"{name:<28} rc={rec['rc']} {rec['verdict']:<10} {rec['wall_s']:7.1f} s  host "
                      f"{_gib(rec['host_tree_bytes'])} GiB  gpu {_gib(rec['smi_gpu_all_bytes'])} GiB", flush=True)
                records.append(rec)
    info["load_after"] = os.getloadavg()
    counted = [r for r in records if not r["warmup"]]
    lines = [f"# Quick gates: {info['date']}", "",
             f"Machine: {info['machine']}; device {device}; load average {info['load_before'][0]:.1f} before, "
             f"{info['load_after'][0]:.1f} after; {args.runs} counted run(s) per op and checkout, interleaved"
             f"{f', after {warmup} warm-up run(s)' if warmup else ''}.", ""]
    lines += [f"- {label}: {c['path']} at {c['commit']}" + (f" (gate args: {' '.join(c['gate_args'])})" if c["gate_args"] else "")
              for label, c in info["checkouts"].items()]
    lines += ["", *table(counted, [t[0] for t in trees], ops), "",
              "Medians over the runs. Stage seconds are each stage's own wall time (the property suite runs beside "
              "the others). GPU peaks from nvidia-smi polled every "
              f"{args.poll_ms} ms; torch peak: the JSON's per-stage torch.cuda.max_memory_allocated summed over "
              "the processes (properties + the largest other stage); host peaks: the gate's process tree's resident "
              "memory polled, the JSON's per-stage peaks summed the same way, and the largest single process (wait4)."]
    lines += ["", "Where the time goes: when each phase began, seconds after the command started (medians; "
              "`equiv.timeline` marks, none in a checkout without them; a suite in shards: its last one):", "",
              *phase_table(counted, [t[0] for t in trees], ops)]
    last = {}
    for r in counted:
        if r.get("gpu_processes_at_peak"):
            last[(r["op"], r["checkout"])] = r
    if last:
        lines += ["", "GPU memory of each of the gate's processes at its peak (nvidia-smi; the last counted run):", "",
                  "| op | checkout | MiB | process |", "|---|---|---|---|"]
        for (op, label), r in last.items():
            lines += [f"| {op} | {label} | {mib} | {what} |" for mib, what in r["gpu_processes_at_peak"]]
    (out / "gate_bench.md").write_text("\n".join(lines) + "\n")
    (out / "gate_bench.json").write_text(json.dumps({**info, "records": records}, indent=1))
    print("\n".join(lines))
    return 0 if all(r["verdict"] in ("pass", "fail") for r in records) else 1


if __name__ == "__main__":
    sys.exit(main())
