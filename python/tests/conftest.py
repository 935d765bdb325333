"""pytest settings for the package's tests: the seed goes in every report's header, so a
failing run can be repeated with CF_TEST_SEED."""

import os


def pytest_report_header(config):
    return f"CF_TEST_SEED={os.environ.get('CF_TEST_SEED') or 20261126}"
