"""What produced an output: equiv's version and commit, the libraries, the device, the date, the command.

Plan. ``collect(device)`` gathers a frozen ``Provenance`` that every report format (HTML, markdown,
table, JSON) prints, so a result found later in a CI artifact still says which code, on which
machine, from which command line produced it. Nothing here may fail a run:

- the version is the running package's ``equiv.__version__`` (the installed metadata if absent);
- the git commit is read only when equiv's own folder is the top of a git work tree (an installed
  wheel inside a user's repository must not report the user's commit); no git, no repository or a
  slow git leaves it ``None``;
- library versions come from the installed metadata, so triton is not imported to be named;
- the device name is the GPU's for ``cuda``, the processor model for ``cpu``, or "unknown";
- the command line keeps only the program's base name (``equiv``), not where it is installed.
"""
from __future__ import annotations

import os
import platform
import shlex
import subprocess
import sys
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from importlib import metadata

import torch

from equiv._version import __version__

LIBRARIES = ("torch", "triton", "numpy")
_GIT_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class Provenance:
    """Fields: ``equiv_version``; ``git_commit`` (40 hex digits) and ``git_modified`` (tracked files
    differ from it), both ``None`` outside a checkout; ``python``; ``libraries`` ((name, version)
    pairs, version ``None`` when not installed); ``device`` and ``device_name``; ``date`` (ISO 8601,
    UTC); ``command`` (shell-quoted)."""

    equiv_version: str
    git_commit: str | None
    git_modified: bool | None
    python: str
    libraries: tuple
    device: str
    device_name: str
    date: str
    command: str

    @property
    def commit_text(self) -> str:
        if self.git_commit is None:
            return "not run from a git checkout"
        return "commit " + self.git_commit[:12] + (" (modified)" if self.git_modified else "")

    def items(self) -> list[tuple[str, str]]:
        """(label, value) pairs in reading order: what every format prints."""
        libs = ", ".join(f"{n} {v or 'not installed'}" for n, v in self.libraries)
        return [("equiv", f"{self.equiv_version}, {self.commit_text}"),
                ("libraries", f"{libs}, python {self.python}"),
                ("device", f"{self.device} ({self.device_name})"),
                ("date", self.date),
                ("command", self.command)]

    def lines(self) -> list[str]:
        return [f"{label}: {value}" for label, value in self.items()]

    def to_json(self) -> dict:
        d = asdict(self)
        d["libraries"] = dict(self.libraries)
        return d


def equiv_version() -> str:
    version = __version__
    if version:
        return version
    try:
        return metadata.version("equiv")
    except metadata.PackageNotFoundError:
        return "unknown"


def library_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _git(folder: str, *args: str) -> str | None:
    try:
        out = subprocess.run(["git", "-C", folder, *args], capture_output=True, text=True,
                             timeout=_GIT_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def git_commit(package_dir: str | None = None) -> tuple[str | None, bool | None]:
    """(commit, modified) of the checkout equiv runs from, or (None, None) when it is not one."""
    package_dir = package_dir or os.path.dirname(os.path.abspath(__file__))
    top = _git(package_dir, "rev-parse", "--show-toplevel")
    if top is None or os.path.realpath(top) != os.path.realpath(os.path.dirname(package_dir)):
        return None, None
    commit = _git(package_dir, "rev-parse", "HEAD")
    if commit is None:                           # a repository with no commit yet
        return None, None
    status = _git(package_dir, "status", "--porcelain", "--untracked-files=no")
    return commit, (None if status is None else bool(status))


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def device_name(device: str) -> str:
    try:
        if device.startswith("cuda"):
            return torch.cuda.get_device_name(torch.device(device))
        return f"{_cpu_name()}, {os.cpu_count()} logical cores"
    except Exception as exc:                     # provenance never ends a run
        return f"unknown ({type(exc).__name__})"


def command_line(argv=None) -> str:
    argv = list(sys.argv if argv is None else argv)
    if not argv:
        return ""
    prog = os.path.basename(argv[0])
    if prog in ("__main__.py", "equiv"):
        prog = "equiv"
    return shlex.join([prog, *argv[1:]])


def collect(device: str = "cpu", argv=None, now: datetime | None = None) -> Provenance:
    commit, modified = git_commit()
    now = now or datetime.now(timezone.utc)
    return Provenance(
        equiv_version=equiv_version(), git_commit=commit, git_modified=modified,
        python=platform.python_version(),
        libraries=tuple((n, library_version(n)) for n in LIBRARIES),
        device=str(device), device_name=device_name(str(device)),
        date=now.isoformat(timespec="seconds"), command=command_line(argv))
