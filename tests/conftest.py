"""Settings shared by the whole test suite (keep this file small: fixtures live next to their tests)."""

import pytest
from hypothesis import HealthCheck, settings

# The CI machine has 2 cores shared with everything else, so wall-clock deadlines per example would
# make property tests flaky without finding bugs. Tests that need more examples say so themselves.
settings.register_profile("asgteach", deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True)
settings.load_profile("asgteach")


# --- the GPU: ONE way to need it (wgpu_helpers.need_gpu: skips loudly without an adapter; fails under CI=true) ---
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "gpu: needs a Vulkan adapter (no adapter: skipped loudly, or under CI=true a "
                                       "failure saying what to install); checked before any fixture is set up")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("gpu") is not None:
        from wgpu_helpers import need_gpu

        need_gpu()


@pytest.fixture(scope="session")
def gpu():
    """The wgpu backend module, whose Vulkan adapter works; without one: skipped loudly, or failed under CI=true."""
    from wgpu_helpers import need_gpu

    return need_gpu()


def pytest_terminal_summary(terminalreporter) -> None:
    """A banner at the end of the run for every test skipped because this machine lacks something (wgpu_helpers)."""
    reasons: dict[str, int] = {}
    for rep in terminalreporter.stats.get("skipped", []):
        why = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
        if "MISSING ON THIS MACHINE:" in why:
            reasons[why] = reasons.get(why, 0) + 1
    if reasons:
        terminalreporter.write_sep("!", "TESTS SKIPPED: this machine lacks what they need (CI=true fails instead)",
                                   red=True, bold=True)
        for why, n in reasons.items():
            terminalreporter.write_line(f"!!! {n} skipped: {why.removeprefix('Skipped: ')}", red=True, bold=True)
