"""The chi-square, Student t and binomial-test functions of equiv.stats.values give scipy.stats'
values, bit for bit (they call the scipy.special functions scipy.stats calls), so no verdict moves
with them; and neither the draft gate's statistics nor the verifiers' import scipy.stats."""
import subprocess
import sys

import numpy as np
import pytest

from equiv.stats.values import binom_test, chi2_sf, t_cdf, t_ppf, t_sf

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
    assert _fresh_process(code) == "False"


def test_binom_test_is_scipy_stats():
    """Equal bits, but where scipy's search stops on any count whose pmf underflows to 0 and this
    one on the first: there the two differ by one subnormal (5e-324 against 0)."""
    rng = np.random.default_rng(2)
    seen = 0
    for n in list(range(1, 40)) + [100, 255, 1000, 4096, 10007, 123457]:
        for p in [0.5, 0.1, 0.9, 1e-3, 0.999, 1 / 3, 0.0, 1.0] + list(rng.random(3)):
            ks = {0, n, n // 2, int(n * p), min(int(n * p) + 1, n), max(int(n * p) - 1, 0)}
            for k in ks | set(rng.integers(0, n + 1, 5).tolist()):
                got, want = binom_test(k, n, p), float(stats.binomtest(k, n, p).pvalue)
                assert got == want or max(got, want) < 1e-300, (k, n, p, got, want)
                seen += want > 1e-300
    assert seen > 1000


def test_binom_test_refuses_counts_outside_the_law():
    from equiv.errors import InvalidArgument
    for k, n, p in ((3, 2, 0.5), (-1, 4, 0.5), (1, 0, 0.5), (1, 4, 1.5)):
        with pytest.raises(InvalidArgument, match="binom_test"):
            binom_test(k, n, p)


def test_the_verifier_statistics_do_not_import_scipy_stats():
    code = ("import sys, numpy as np\n"
            "from equiv.ops.verify.laws import acceptance_family\n"
            "from equiv.stats.joint import swap_sign_test\n"
            "rng = np.random.default_rng(0)\n"
            "acceptance_family([{'successes': 40, 'trials': 100, 'alpha': 0.5}], 0.01)\n"
            "swap_sign_test('x', rng.integers(0, 2, 300), rng.integers(0, 2, 300))\n"
            "print('scipy.stats' in sys.modules)\n")
    assert _fresh_process(code) == "False"


def _fresh_process(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.strip()
