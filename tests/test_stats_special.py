"""The chi-square and Student t functions of equiv.stats.values give scipy.stats' values, bit for
bit (they call the scipy.special functions scipy.stats calls), so no verdict moves with them; and
the draft gate's statistics no longer import scipy.stats."""
import subprocess
import sys

import numpy as np
import pytest

from equiv.stats.values import chi2_sf, t_cdf, t_ppf, t_sf

stats = pytest.importorskip("scipy.stats")


def test_chi2_sf_is_scipy_stats():
    rng = np.random.default_rng(0)
    for df in list(range(1, 120)) + [255, 399, 1000, 4095]:
        for x in np.concatenate([rng.random(20) * 3 * df, [0.0, 1e-12, df, 40.0 * df]]):
            assert chi2_sf(float(x), df) == float(stats.chi2.sf(float(x), df)), (x, df)


def test_t_functions_are_scipy_stats():
    rng = np.random.default_rng(1)
    for df in list(range(1, 80)) + [199, 1023, 100000]:
        for q in (0.5, 0.9, 0.95, 0.975, 0.99, 0.999, 1 - 1e-6):
            assert t_ppf(q, df) == float(stats.t.ppf(q, df)), (q, df)
        for x in np.concatenate([rng.normal(size=10) * 4, [0.0, -30.0, 30.0]]):
            assert t_cdf(float(x), df) == float(stats.t.cdf(float(x), df)), (x, df)
            assert t_sf(float(x), df) == float(stats.t.sf(float(x), df)), (x, df)


def test_the_mtp_statistics_do_not_import_scipy_stats():
    code = ("import sys, numpy as np\n"
            "from equiv.stats import equivalence_test, sampling_fit\n"
            "from equiv.stats.twosample import text_law_test\n"
            "rng = np.random.default_rng(0)\n"
            "sampling_fit(rng.random(4000), rng.integers(0, 3, 4000))\n"
            "equivalence_test(rng.random(50), rng.random(50))\n"
            "a = rng.integers(0, 5, (200, 4)); b = rng.integers(0, 5, (200, 4))\n"
            "text_law_test(a, b, np.zeros(200, int), np.zeros(200, int), 4)\n"
            "print('scipy.stats' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "False"
