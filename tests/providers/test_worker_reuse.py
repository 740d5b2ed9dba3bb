"""The worker's chunk reuse, planned on token lists: which cached runs a new
prompt keeps and where they move (llama-server's `--cache-reuse` walk).

The real model's side (the cells really moved, the same story told) is in
test_embedded_reuse.py."""
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.providers.worker import plan_reuse


def _moved(cache: list[int], moves) -> dict[int, int]:
    """The cache as position -> token after the moves, done as llama.cpp does
    them: drop the cells between the chunk's new and old start, shift the chunk."""
    cells = dict(enumerate(cache))
    for at, to, n in moves:
        for pos in range(to, at):
            cells.pop(pos, None)
        chunk = {pos: cells.pop(pos) for pos in range(at, at + n)}
        cells.update({pos + to - at: token for pos, token in chunk.items()})
    return cells


def _run(start: int, n: int) -> list[int]:
    return list(range(start, start + n))


SYSTEM, DROPPED, KEPT, OLD_TAIL = _run(0, 40), _run(1000, 300), _run(2000, 500), _run(3000, 60)
REPLY, NEW_TAIL = _run(4000, 90), _run(5000, 60)


def test_a_floor_step_keeps_the_system_block_and_moves_the_kept_history():
    cache = SYSTEM + DROPPED + KEPT + OLD_TAIL
    prompt = SYSTEM + KEPT + REPLY + NEW_TAIL
    kept, moves = plan_reuse(cache, prompt, 64)
    assert kept == len(SYSTEM) + len(KEPT)
    assert moves == [(len(SYSTEM) + len(DROPPED), len(SYSTEM), len(KEPT))]
    cells = _moved(cache, moves)
    assert [cells[p] for p in range(kept)] == prompt[:kept]


def test_without_reuse_only_the_prefix_is_kept():
    cache = SYSTEM + DROPPED + KEPT + OLD_TAIL
    kept, moves = plan_reuse(cache, SYSTEM + KEPT + REPLY, 0)
    assert (kept, moves) == (len(SYSTEM), [])


def test_a_run_shorter_than_the_chunk_is_read_again():
    cache = SYSTEM + DROPPED + _run(2000, 40) + OLD_TAIL
    kept, moves = plan_reuse(cache, SYSTEM + _run(2000, 40) + REPLY, 64)
    assert (kept, moves) == (len(SYSTEM), [])
    assert plan_reuse(cache, SYSTEM + _run(2000, 40) + REPLY, 32)[0] == len(SYSTEM) + 40


def test_new_content_ends_the_walk_even_when_cached_runs_follow_it():
    """Tokens after new content sit at positions the new content must fill
    first; llama-cpp-python evaluates a contiguous rest, so the walk stops there."""
    cache = SYSTEM + DROPPED + KEPT + OLD_TAIL
    kept, moves = plan_reuse(cache, SYSTEM + REPLY + KEPT, 64)
    assert (kept, moves) == (len(SYSTEM), [])


def test_several_chunks_in_order_each_moved_down():
    a, b = _run(2000, 100), _run(6000, 80)
    cache = SYSTEM + DROPPED + a + _run(7000, 30) + b + OLD_TAIL
    prompt = SYSTEM + a + b + REPLY
    kept, moves = plan_reuse(cache, prompt, 64)
    assert kept == len(SYSTEM) + len(a) + len(b) and len(moves) == 2
    cells = _moved(cache, moves)
    assert [cells[p] for p in range(kept)] == prompt[:kept]


def test_the_whole_prompt_can_come_from_cache():
    cache = SYSTEM + KEPT + OLD_TAIL
    assert plan_reuse(cache, SYSTEM + KEPT, 64) == (len(SYSTEM) + len(KEPT), [])


tokens = st.lists(st.integers(0, 5), max_size=120)


@settings(max_examples=300, deadline=None)
@given(cache=tokens, prompt=tokens, chunk=st.integers(0, 8))
def test_what_is_kept_is_the_prompt_start_and_every_move_goes_down(cache, prompt, chunk):
    kept, moves = plan_reuse(cache, prompt, chunk)
    cells = _moved(cache, moves)
    assert [cells.get(p) for p in range(kept)] == prompt[:kept]
    prefix = next((i for i, (a, b) in enumerate(zip(cache, prompt, strict=False)) if a != b), min(len(cache), len(prompt)))
    assert kept >= prefix
    for at, to, n in moves:
        assert to <= at and n >= max(chunk, 1)
    for (at, to, n), later in zip(moves, moves[1:], strict=False):
        assert later[0] >= at + n and later[1] == to + n
