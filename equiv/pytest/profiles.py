"""Equiv's Hypothesis profiles: what only an equiv run needs of Hypothesis (``equiv.pytest.plugin``
imports this module when a run becomes an equiv run, ``activate``: a host project's own pytest
run never pays Hypothesis's import for it).

- ``register_profiles``: ``equiv-dev``, ``equiv-ci`` (derandomized, no database) and
  ``equiv-nightly`` (10,000 examples), each with what equiv's properties need whatever profile is
  loaded (``needed``: no deadline, no explain phase, two health checks off).
- ``load_profile(config)``: the profile ``HYPOTHESIS_PROFILE`` names (default ``equiv-dev``),
  unless the host or ``--hypothesis-profile`` loaded one.
- ``suite_settings``: the settings each of equiv's properties runs under.
- ``profile_name``: the profile loaded now (``equiv.pytest.plugin``'s JSON report).
"""
from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, Phase, settings

PROFILES = ("equiv-dev", "equiv-ci", "equiv-nightly")


def needed() -> dict:
    """The Hypothesis settings equiv's properties need whatever profile is loaded."""
    # No deadline: one example builds and judges rows of V = 129280 (seconds on a CPU).
    # No explain phase: it traces coverage while re-running the failing example with parts
    # varied, which multiplies the cost of a failure at V = 129280 (15 s instead of 3 s) for a
    # note the REPRO line already makes unnecessary.
    return dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
                phases=[p for p in Phase if p is not Phase.explain])


def suite_settings():
    """The settings each of equiv's properties runs under: the loaded profile when it is one of
    equiv's; under a host project's own profile (its conftest loaded one), that profile's
    randomness and database but equiv's deadline, health checks, phases and ``equiv-dev``'s
    example count, so that a host's 200 ms deadline or 500 examples never reach equiv's suite.
    Nothing is loaded or registered: the host's own tests keep their profile."""
    register_profiles()
    current = settings.default
    ours = settings.get_current_profile_name() in PROFILES
    examples = current.max_examples if ours else settings.get_profile("equiv-dev").max_examples
    return settings(current, max_examples=examples, **needed())


def register_profiles() -> None:
    common = needed()
    settings.register_profile("equiv-dev", max_examples=30, **common)
    settings.register_profile("equiv-ci", max_examples=30, derandomize=True, database=None,
                              print_blob=True, **common)
    settings.register_profile("equiv-nightly", max_examples=10_000, print_blob=True, **common)


def profile_name() -> str:
    """The name of the Hypothesis profile loaded now (the JSON report's ``profile``)."""
    return settings.get_current_profile_name()


def load_profile(config) -> None:
    """Load the profile ``HYPOTHESIS_PROFILE`` names (default equiv-dev), unless one is loaded."""
    register_profiles()
    wanted = os.environ.get("HYPOTHESIS_PROFILE")
    if wanted:
        try:
            settings.get_profile(wanted)
        except Exception:
            raise pytest.UsageError(
                f"HYPOTHESIS_PROFILE={wanted!r} is not a registered Hypothesis profile: equiv's are "
                f"{', '.join(PROFILES)}") from None
    if config.getoption("hypothesis_profile", None):
        return                                   # the caller's choice stands
    # HYPOTHESIS_PROFILE naming one of equiv's profiles is an explicit ask: it wins over a profile
    # loaded without one (Hypothesis loads its own "ci" profile by itself when CI is set)
    if wanted not in PROFILES and settings.get_current_profile_name() != "default":
        return                                   # the host's choice stands
    settings.load_profile(wanted or "equiv-dev")
