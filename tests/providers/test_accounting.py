import pytest

from engine.providers.accounting import classify_usage


def verdict(prompt, estimate=3000, budget=4096, out=400, verified=True):
    return classify_usage({"prompt_tokens": prompt}, estimate=estimate, budget=budget,
                          max_output_tokens=out, window_verified=verified)


@pytest.mark.parametrize("prompt", [None, 0, -5, 3.0, True, "3000"])
def test_no_count_is_unknown_never_a_fit(prompt):
    result = verdict(prompt)
    assert result["status"] == "unknown" and "nothing confirms" in result["detail"]


def test_fits_records_the_margin():
    result = verdict(3100)
    assert result["status"] == "fits" and result["observed_margin"] == 4096 - 400 - 3100
    assert result["difference"] == 100


def test_truncation_suspected_when_the_server_read_far_less():
    # Ollama at a 4,096 window reported 2,050 of 13,875 tokens with HTTP 200.
    result = verdict(2050, estimate=13875, budget=16384)
    assert result["status"] == "truncation_suspected" and "cuts from the start" in result["detail"]


def test_exceeded_when_prompt_and_reply_pass_the_budget():
    assert verdict(3800)["status"] == "exceeded"


def test_unverified_window_is_said():
    assert verdict(3100, verified=False)["detail"].endswith("not verified for this turn.")
