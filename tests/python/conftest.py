"""Shared fixtures: fresh random inputs each run, with the seed printed for replay."""
import os

import numpy as np
import pytest


@pytest.fixture
def rng():
    """A generator seeded freshly each run; the seed is printed so a failure can be replayed
    (FASTATTN_TEST_SEED=<seed> pytest ... -k <the test> draws the same inputs again)."""
    given = os.environ.get("FASTATTN_TEST_SEED")
    seed = int(given) if given else int(np.random.SeedSequence().entropy % (2**32))
    print(f"rng seed {seed}")
    return np.random.default_rng(seed)
