"""Settings shared by the whole test suite (keep this file small: fixtures live next to their tests)."""

from hypothesis import HealthCheck, settings

# The CI machine has 2 cores shared with everything else, so wall-clock deadlines per example would
# make property tests flaky without finding bugs. Tests that need more examples say so themselves.
settings.register_profile("asgteach", deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True)
settings.load_profile("asgteach")
