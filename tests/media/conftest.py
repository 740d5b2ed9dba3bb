import pytest
from office import build

from engine.media import providers


@pytest.fixture
def office(wb):
    return build(wb)


@pytest.fixture(autouse=True)
def empty_registry():
    """Every test starts and ends with the process-wide registry as it found it."""
    before = providers.registered()
    yield
    for name in providers.registered():
        providers.unregister(name)
    for name, provider in before.items():
        providers.register(name, provider)
