"""A grid of replays, serially and on a real (small, loopback) Dask cluster,
and the block-trim comparison read from the server's cache figures."""
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

from engine import WorkbenchError  # noqa: E402
from experiments import compare, grid  # noqa: E402
from experiments.replay import Factory, record  # noqa: E402

CACHING = Factory("research_doubles:CachingNarrator", path=str(HERE))


@pytest.fixture(scope="module")
def recording(tmp_path_factory):
    camp = compare.scripted(tmp_path_factory.mktemp("rec") / "recording.db", turns=20)
    rec = record(camp)
    camp.workbench.close()
    return rec


def test_the_shipped_campaign_is_a_recording_of_its_moves(recording):
    assert len(recording) == 20
    assert [s.mode for s in recording.steps[:6]] == ["act", "act", "continue", "act", "act", "direct"]
    assert recording.steps[5].text == "Let someone approach the shed."
    assert {s.narration for s in recording.steps} == set(compare.PASSAGES)


def test_cells_are_the_product_of_the_axes_once_per_narrator():
    made = grid.cells({"a": "x", "b": "y"}, trim_fraction=[0, 4], context_budget=[2048])
    assert [c["label"] for c in made] == ["a, trim_fraction=0, context_budget=2048", "a, trim_fraction=4, context_budget=2048",
                                          "b, trim_fraction=0, context_budget=2048", "b, trim_fraction=4, context_budget=2048"]
    assert made[2]["narrator"] == "y" and made[3]["trim_fraction"] == 4
    with pytest.raises(WorkbenchError, match="no cells"):
        grid.run(object(), [], "unused")


def block_trim_grid(recording, workdir, **kw):
    cells = [dict(c, max_output_tokens=64) for c in grid.cells(trim_fraction=[0, 4], context_budget=[1536])]
    return cells, grid.run(recording, cells, workdir, narrator=CACHING, keep_first=12, progress=False, **kw)


def test_block_trim_processes_fewer_prompt_tokens_than_sliding(recording, tmp_path):
    cells, df = block_trim_grid(recording, tmp_path, workers=0)
    assert list(df["cell"].unique()) == ["original", cells[0]["label"], cells[1]["label"]]
    assert len(df) == 60 and all(Path(p).exists() for p in df["db_path"].dropna().unique())
    table = compare.summarise(df)
    assert table.loc[cells[0]["label"], "turns"] == 7  # 8 narrated turns, the cold first one left out
    verdict = compare.answer(table, slide=cells[0]["label"], trimmed=cells[1]["label"])
    assert verdict["processed_ratio"] > 1.3
    assert verdict["cached_share_trim"] > verdict["cached_share_slide"]
    assert verdict["best_cell"] == cells[1]["label"]
    narrated = df[~df["recorded"].astype(bool)]
    assert narrated[narrated["cell"] == cells[1]["label"]]["floor_depth"].notna().all()  # a block floor holds
    assert narrated[narrated["cell"] == cells[0]["label"]]["floor_depth"].isna().all()  # sliding has none
    fig = compare.plot(df, table)
    assert len(fig.axes) == 4
    # New content counted with the last reply as the narrator generated it (its completion tokens) and as
    # stored (the text kept): the caching narrator's count is its words, so both bases are set against one.
    rows = narrated[narrated["cell"] == cells[1]["label"]].reset_index(drop=True)
    assert rows["generated_tokens"].notna().all()
    continued = 0
    for i in range(1, len(rows)):
        before, basis = rows.loc[i - 1, "generated_tokens"], rows.loc[i, "generated_input_server_tokens"]
        if rows.loc[i, "input"]:
            assert basis > before  # the reply as generated and the input
        else:
            assert basis == before  # a Continue: the reply alone
            continued += 1
    assert continued and table.loc[cells[1]["label"], "turn_over_generated_input_median"] > 0


def test_the_same_grid_on_a_local_dask_cluster_gives_the_same_rows(recording, tmp_path):
    _, serial = block_trim_grid(recording, tmp_path / "serial", workers=0)
    _, parallel = block_trim_grid(recording, tmp_path / "parallel", workers=2)
    columns = ["cell", "turn", "text", "prompt_tokens", "processed_tokens", "cached_tokens", "floor_depth"]
    assert serial[columns].fillna(-1).equals(parallel[columns].fillna(-1))
    assert all(str(tmp_path / "parallel") in p for p in parallel["db_path"].dropna())


def test_a_scheduler_address_is_used_as_given(recording, tmp_path):
    from dask.distributed import LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None) as cluster:
        cells = [{"trim_fraction": 0, "label": "slide"}]
        df = grid.run(recording, cells, tmp_path, narrator=CACHING, scheduler=cluster.scheduler_address,
                      progress=False)
    assert (df[df["cell"] == "slide"]["text"].str.startswith("Beat ")).all()


def test_new_content_is_set_against_processed_tokens_in_the_servers_own_units():
    """A tokenizer that splits text into twice our count doubles the new content
    too; a turn whose server gave no count has no ratio rather than a guess."""
    import pandas as pd

    from experiments.replay import _in_server_tokens

    frame = pd.DataFrame({"new_tokens": [100, 100, 100], "prompt_tokens": [2000, None, 1000],
                          "estimate_tokens": [1000, 1000, 0]})
    scaled = _in_server_tokens(frame)
    assert scaled.iloc[0] == 200 and pd.isna(scaled.iloc[1]) and pd.isna(scaled.iloc[2])
