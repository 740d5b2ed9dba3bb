import pytest
from office import build

from engine.media import registry


@pytest.fixture
def office(wb):
    return build(wb)


@pytest.fixture(autouse=True)
def empty_registry():
    """Every test starts and ends with the process-wide registry as it found it."""
    before = registry.registered()
    yield
    for name in registry.registered():
        registry.unregister(name)
    for name, provider in before.items():
        registry.register(name, provider)
