"""Run the property suite against one candidate in-process, and the mutant zoo's kill table.

Plan
----
- ``run_suite(spec, k=...)`` runs ``pytest <properties> --equiv-candidate SPEC -x`` inside this
  process (no interpreter start-up, torch already imported) under the ``equiv-ci`` profile, with
  ``--equiv-report-json``, and returns the parsed report. ``-x`` stops at the first failing
  property: properties run broad-and-cheap first (``conftest.PROPERTY_ORDER``), so a mutant
  costs the properties it survives plus the one that kills it, shrinking included.
- ``kill(name)`` judges one mutant of ``equiv.ops.draft_topk.mutants.MUTANTS`` and says which property killed
  it, after how many examples (``first_failure``: the calls until the first failing one), and
  the shrunk counterexample.
- ``python -m equiv.properties.killing [NAME ...]`` prints the kill table as Markdown (the one in
  docs/property-suite.md) and exits 1 if a mutant survived or a legal variant failed;
  ``--matrix`` instead runs every property alone against every mutant (which properties can
  kill which bug, with the examples each needed).
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass

import pytest
from hypothesis import settings

import equiv.properties as properties
from equiv.ops.draft_topk.mutants import LEGAL_VARIANTS, MUTANTS
from equiv.properties.conftest import PROPERTY_ORDER


@dataclass(frozen=True)
class Kill:
    name: str
    bug_class: str
    killed: bool
    property: str | None
    first_failure: int | None
    counterexample: str | None
    message: str | None
    duration_s: float
    repro: str | None = None

    @property
    def trigger(self) -> str | None:
        """What made the mutant fail: Hypothesis's shrunk example, or, for a property that replays a
        fixed plan (recipes, call histories), the REPRO line of the failing input."""
        return self.counterexample or self.repro

    def row(self) -> str:
        ce = " ".join((self.trigger or "").replace("Falsifying example:", "")
                      .replace("Failing test case:", "").replace("REPRO:", "").split())
        return (f"| `{self.name}` | {self.bug_class} | {'killed' if self.killed else '**SURVIVED**'} | "
                f"{self.property or '-'} | {self.first_failure or '-'} | `{ce or '-'}` |")


def properties_dir() -> str:
    return os.path.dirname(os.path.abspath(properties.__file__))


def run_suite(spec: str | None, *, k: int = 1, device: str = "cpu", budget: str = "full", profile: str = "equiv-ci",
              stop_at_first: bool = True, extra=(), quiet: bool = True) -> dict:
    """The ``--equiv-report-json`` document of one in-process run of the suite on ``spec``
    (``None``: the built-in paths, with the known-failure ledger)."""
    before = settings.get_current_profile_name()
    with tempfile.TemporaryDirectory(prefix="equiv-kill-") as tmp:
        path = os.path.join(tmp, "report.json")
        args = [properties_dir(), "-q", "--tb=no", "--no-header", "-p", "no:cacheprovider",
                f"--hypothesis-profile={profile}", *([f"--equiv-candidate={spec}"] if spec else []), f"--equiv-k={k}",
                f"--equiv-device={device}", f"--equiv-budget={budget}", f"--equiv-report-json={path}",
                *(["-x"] if stop_at_first else []), *extra]
        try:
            with contextlib.redirect_stdout(io.StringIO()) if quiet else contextlib.nullcontext():
                pytest.main(args)
        finally:
            settings.load_profile(before)
        with open(path) as f:
            return json.load(f)


def _first_failure(report: dict):
    return next((t for t in report["tests"] if t["outcome"] in ("failed", "error")), None)


def kill(name: str, **kwargs) -> Kill:
    m = MUTANTS[name]
    t0 = time.perf_counter()
    failed = _first_failure(run_suite(f"equiv.ops.draft_topk.mutants:{name}", k=m.k, **kwargs))
    dt = time.perf_counter() - t0
    if failed is None:
        return Kill(name, m.bug_class, False, None, None, None, None, dt)
    return Kill(name, m.bug_class, True, failed.get("property"), failed.get("first_failure"),
                failed.get("counterexample"), failed.get("message"), dt, failed.get("repro"))


def legal_failures(name: str, **kwargs) -> list[dict]:
    """The failing tests of a legal variant (must be empty)."""
    report = run_suite(f"equiv.ops.draft_topk.mutants:{name}", k=LEGAL_VARIANTS[name].k, stop_at_first=False, **kwargs)
    return [t for t in report["tests"] if t["outcome"] in ("failed", "error")]


def matrix(names, properties) -> dict:
    """{(mutant, property): first_failure or None}: each property run alone against each mutant."""
    out = {}
    for name in names:
        for prop in properties:
            report = run_suite(f"equiv.ops.draft_topk.mutants:{name}", k=MUTANTS[name].k, extra=["-k", f"test_{prop}"])
            failed = _first_failure(report)
            out[name, prop] = None if failed is None else (failed.get("first_failure") or 1)
            print(f"{name} {prop} {out[name, prop]}", file=sys.stderr, flush=True)
    return out


def print_matrix(names) -> None:
    props = [p for p in PROPERTY_ORDER if p != "builtin_argument_errors"]
    m = matrix(names, props)
    print("| mutant | " + " | ".join(props) + " |")
    print("|---|" + "---|" * len(props))
    for name in names:
        print(f"| `{name}` | " + " | ".join(str(m[name, p]) if m[name, p] else "." for p in props) + " |")


def main(argv=None) -> int:
    names = list(argv if argv is not None else sys.argv[1:])
    if names[:1] == ["--matrix"]:
        print_matrix(names[1:] or list(MUTANTS))
        return 0
    names = names or list(MUTANTS)
    print("| mutant | bug class | verdict | killed by | examples | shrunk counterexample |")
    print("|---|---|---|---|---|---|")
    kills = []
    for name in names:
        kills.append(kill(name))
        print(kills[-1].row(), flush=True)
    survived = [k.name for k in kills if not k.killed]
    print(f"\nkill rate {len(kills) - len(survived)}/{len(kills)}; "
          f"{sum(k.duration_s for k in kills):.1f} s in all")
    bad_legal = {n: legal_failures(n) for n in LEGAL_VARIANTS}
    for n, fails in bad_legal.items():
        print(f"legal variant {n}: {'passes' if not fails else 'FAILS ' + fails[0]['nodeid']}")
    return 1 if survived or any(bad_legal.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
