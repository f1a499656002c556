"""The long validations (``./run validate``) share the test suite's fixtures and scheduling."""

from tests.conftest import pytest_collection_modifyitems, rng  # noqa: F401
from tests.solvers.test_approx_checks import wiggly  # noqa: F401
