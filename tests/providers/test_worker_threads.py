"""How many threads the embedded model's worker gets: one per idle core.

llama.cpp's threads wait for each other at a spin barrier after every layer;
one more thread than there are free cores made a 48-token reply ten times
slower on this 2-core machine, so the count follows the load."""
import os

import pytest

from engine.providers import embedded, worker
from engine.providers.worker import ModelSpec, default_threads


@pytest.fixture
def machine(monkeypatch):
    monkeypatch.delenv(worker.THREADS_ENV, raising=False)

    def set_up(cores: int, load: float):
        monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cores)), raising=False)
        monkeypatch.setattr(os, "getloadavg", lambda: (load, load, load))
    return set_up


@pytest.mark.parametrize(("cores", "load", "threads"), [
    (2, 0.3, 2),    # idle: every core
    (2, 1.2, 1),    # one core busy elsewhere
    (2, 7.0, 1),    # overloaded: never fewer than one
    (16, 0.0, 8),   # more cores than llama.cpp gains from at this size
    (16, 4.4, 8),
    (4, 2.6, 1),
])
def test_threads_follow_the_free_cores(machine, cores, load, threads):
    machine(cores, load)
    assert default_threads() == threads


def test_a_machine_without_a_load_average_uses_every_core(machine, monkeypatch):
    machine(4, 0.0)

    def missing():
        raise OSError("no load average")
    monkeypatch.setattr(os, "getloadavg", missing)
    assert default_threads() == 4


def test_the_environment_overrides_the_choice(machine, monkeypatch):
    machine(2, 5.0)
    monkeypatch.setenv(worker.THREADS_ENV, "3")
    assert default_threads() == 3
    monkeypatch.setenv(worker.THREADS_ENV, "many")
    assert default_threads() == 1  # not a number: back to the measured choice


def test_a_changed_load_does_not_start_a_second_worker_for_the_same_model(machine, monkeypatch):
    monkeypatch.setattr(embedded, "_workers", {})
    machine(2, 0.0)
    first = embedded.shared_worker(ModelSpec("/models/a.gguf", 2048))
    machine(2, 1.5)
    again = embedded.shared_worker(ModelSpec("/models/a.gguf", 2048))
    other = embedded.shared_worker(ModelSpec("/models/a.gguf", 4096))
    assert again is first and first.spec.threads == 2 and other is not first and other.spec.threads == 1
