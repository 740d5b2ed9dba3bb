"""compare.ipynb runs headless under papermill with small parameters and an
instant narrator that reports cache figures, and records its answer."""
from pathlib import Path

import papermill as pm

from experiments.results import read_metrics

NOTEBOOKS = Path(__file__).parents[2] / "notebooks"
HERE = Path(__file__).parent


def test_compare_notebook_answers_the_block_trim_question(tmp_path):
    out, sidecar = tmp_path / "compare.ipynb", tmp_path / "compare.json"
    pm.execute_notebook(str(NOTEBOOKS / "compare.ipynb"), str(out), kernel_name="python3", cwd=str(NOTEBOOKS),
                        progress_bar=False, parameters={
                            "narrators": {"instant": "research_doubles:CachingNarrator"},
                            "narrator_path": str(HERE), "scripted_turns": 20, "keep_first": 12,
                            "axes": {"trim_fraction": [0, 4], "context_budget": [1536]},
                            # The instant narrator keeps one cache: derived requests would evict it.
                            "settings": {"max_output_tokens": 64, "memory_enabled": False, "auto_summarize": False},
                            "workers": 0,
                            "ablate_sections": ["protocol"], "ablate_samples": 1,
                            "workdir": str(tmp_path / "work"), "sidecar": str(sidecar)})
    m = read_metrics(out)
    assert sidecar.exists() and m["cells"] == 2 and m["turns"] == 20
    (verdict,) = m["block_trim"]
    assert verdict["group"] == "instant, trim_fraction=*, context_budget=1536"
    assert verdict["processed_ratio"] > 1.3 and verdict["cached_share_trim"] > verdict["cached_share_slide"]
    (target,) = m["targets"]  # issue 28's target for fraction 4 (the instant narrator moves nothing)
    assert target["target"] == 1.5 and target["trim_fraction"] == 4 and target["processed_over_new"] > 0
    by_cell = {row["cell"]: row for row in m["table"]}
    assert by_cell["instant, trim_fraction=4, context_budget=1536"]["turns"] == 7
    variants = {row["variant"]: row for row in m["ablation"]}
    assert variants["without protocol"]["removed_tokens"] > 0 and variants["as recorded"]["removed_tokens"] == 0
