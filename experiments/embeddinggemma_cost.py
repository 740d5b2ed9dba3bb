"""What EmbeddingGemma-300M costs on this machine, and what each cheaper path changes.

`python -m experiments.embeddinggemma_cost WHAT` (WHAT: lengths, fidelity,
rates, query, memory; --help for the options). Every figure is printed with
the one-minute load average beside it: on a shared 2-core machine a figure
means little without it, so the rates and latencies are measured in
interleaved rounds (each path sees the same load) and repeated.

- lengths: the passages of the four knowledge test documents (the chunker's
  own, each as its indexed line), in Gemma tokens with the document prompt:
  what max_seq_length must hold.
- fidelity: ~200 of those passages (one relevant passage per targeted scene
  of retrieval_labels.json, the rest drawn at random) and the targeted scenes
  as queries, embedded by PyTorch (sentence-transformers, fp32) and by each
  other path: 1 - cosine to PyTorch's vectors, and how many nearest
  neighbours change (a passage's nearest passage, a scene's nearest passage);
  Matryoshka 512/256 too.
- rates: document embedding, passages a second, PyTorch against ONNX Runtime
  fp32 and dynamic int8.
- query: one short query's latency, 1 and 2 threads.
- memory: the peak resident memory of a process holding the model, after 16
  passages and one query, each way (a fresh process each: queries through
  ONNX Runtime, both through the int8 copy, PyTorch alone with the export
  moved aside for the while).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from engine.knowledge.chunking import chunk, index_line
from engine.providers import embeddinggemma as gemma
from engine.providers.mpnet import cache_root

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "knowledge"
DOCUMENTS = ("srd5.md", "treasure_island.txt", "openlore.md", "time_machine.txt")
SCENE = "I draw my sword and step towards the old lighthouse keeper."


def load1() -> str:
    return f"load {os.getloadavg()[0]:.2f}"


def passages() -> list[tuple[str, str]]:
    """(document file, indexed line) for every passage of the four documents."""
    out = []
    for name in DOCUMENTS:
        text = (DATA / name).read_text(encoding="utf-8-sig")
        out += [(name, index_line(c.heading, c.text)) for c in chunk(text, markdown=name.endswith(".md"))]
    return out


def model(threads: int = 2):
    import torch
    from sentence_transformers import SentenceTransformer

    from engine.providers.embedders import EmbeddingGemmaEmbedder

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    torch.set_num_threads(threads)
    loaded = SentenceTransformer(str(gemma.model_dir()), device="cpu")
    loaded.max_seq_length = EmbeddingGemmaEmbedder.max_seq
    return loaded


def session(path: Path, threads: int):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def export_paths(st) -> dict[str, Path]:
    """The checked fp32 export and its int8 copy, as make setup makes them (made here if missing)."""
    folder, digest = cache_root() / gemma.EXPORT_FOLDER, gemma.weights_sha256()
    if not gemma.exported(folder, digest):
        gemma.export_onnx(st, folder, digest)
    if not gemma.exported(folder, digest, int8=True):
        gemma.quantize_int8(st, folder, digest)
    return {"onnx fp32": folder / gemma.ENCODER_FILE, "onnx int8": folder / gemma.INT8_FILE}


def encoder(st, path: Path | None, threads: int, batch: int = 16):
    """texts (prompt included) -> unit vectors, through PyTorch (path None) or an ONNX file, in
    batches of alike length as sentence-transformers makes them."""
    if path is None:
        return lambda texts: st.encode(texts, batch_size=batch, convert_to_numpy=True, show_progress_bar=False)
    run = session(path, threads)

    def encode(texts):
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        out = np.zeros((len(texts), 768), np.float32)
        for start in range(0, len(texts), batch):
            index = order[start:start + batch]
            out[index] = gemma.encode_onnx(st, run, [texts[i] for i in index])
        return out
    return encode


def lengths(args) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(gemma.model_dir()))
    found = passages()
    counts = np.array([len(tokenizer(gemma.DOCUMENT_PROMPT + line)["input_ids"]) for _, line in found])
    print(f"{len(found)} passages; Gemma tokens with the document prompt: median {np.median(counts):.0f}, "
          f"99th percentile {np.percentile(counts, 99):.0f}, longest {counts.max()}; over 256: "
          f"{(counts > 256).sum()}, over 320: {(counts > 320).sum()}, over 384: {(counts > 384).sum()}")


def _sample(found, n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [line for _, line in rng.sample(found, n)]


def _relevant(scene: dict, files: dict, name: str, line: str) -> bool:
    """A passage of the scene's document with one of its headings in the trail or one of its phrases."""
    trail = {part.strip().lower() for part in line.split("\n")[0].split(" > ")}
    return name == files[scene["document"]] and bool({h.lower() for h in scene["headings"]} & trail or any(
        p.lower() in line.lower() for p in scene["phrases"]))


def fidelity(args) -> None:
    found = passages()
    labels = json.loads((DATA / "retrieval_labels.json").read_text(encoding="utf-8"))
    files = {k: v["file"] for k, v in labels["documents"].items()}
    chosen, scenes = [], []
    for scene in labels["targeted"]:
        for i, (name, line) in enumerate(found):
            if _relevant(scene, files, name, line):
                if i not in chosen:
                    chosen.append(i)
                scenes.append(scene)
                break
    rest = [i for i in range(len(found)) if i not in chosen]
    chosen = (chosen + random.Random(11).sample(rest, args.n))[:args.n]
    documents = [gemma.DOCUMENT_PROMPT + found[i][1] for i in chosen]
    queries = [gemma.QUERY_PROMPT + s["scene"] for s in scenes]
    relevant = [{j for j, i in enumerate(chosen) if _relevant(s, files, *found[i])} for s in scenes]
    st = model(2)

    def top1(a, b=None):
        s = a @ (a if b is None else b).T
        if b is None:
            np.fill_diagonal(s, -9)
        return s.argmax(1)

    def unit(x):
        return x / np.linalg.norm(x, axis=1, keepdims=True)

    def firsts(q, d):
        return sum(int(best in wanted) for best, wanted in zip(top1(q, d), relevant, strict=True))

    torch_run = encoder(st, None, 2)
    ref, ref_q = torch_run(documents), torch_run(queries)
    ref_pp, ref_qp = top1(ref), top1(ref_q, ref)
    print(f"{len(documents)} passages, {len(queries)} targeted scenes ({load1()}); PyTorch fp32 768: a relevant "
          f"passage first for {firsts(ref_q, ref)}/{len(queries)} scenes")
    for dims in (512, 256):
        d, q = unit(ref[:, :dims]), unit(ref_q[:, :dims])
        print(f"Matryoshka {dims}: nearest passage changed for {(top1(d) != ref_pp).sum()}/{len(d)} passages, "
              f"{(top1(q, d) != ref_qp).sum()}/{len(q)} scenes; a relevant passage first for "
              f"{firsts(q, d)}/{len(q)} scenes")
    for name, path in export_paths(st).items():
        run = encoder(st, path, 2)
        v, q = run(documents), run(queries)
        dev, dev_q = 1 - (v * ref).sum(1), 1 - (q * ref_q).sum(1)
        print(f"{name}: 1 - cosine to PyTorch, passages max {dev.max():.2g} mean {dev.mean():.2g}, scenes max "
              f"{dev_q.max():.2g} mean {dev_q.mean():.2g}; nearest passage changed for "
              f"{(top1(v) != ref_pp).sum()}/{len(v)} passages, {(top1(q, v) != ref_qp).sum()}/{len(q)} scenes; "
              f"a relevant passage first for {firsts(q, v)}/{len(q)} scenes")


def rates(args) -> None:
    texts = [gemma.DOCUMENT_PROMPT + t for t in _sample(passages(), args.n, 7)]
    st = model(args.threads)
    paths = {"pytorch fp32": None, **export_paths(st)}
    runs = {name: encoder(st, path, args.threads) for name, path in paths.items()}
    for run in runs.values():
        run(texts[:4])
    got: dict[str, list[float]] = {name: [] for name in runs}
    for round_ in range(args.rounds):
        for name, run in runs.items():
            before = load1()
            started = time.perf_counter()
            run(texts)
            got[name].append(len(texts) / (time.perf_counter() - started))
            print(f"round {round_ + 1} {name}: {got[name][-1]:.2f} passages/s ({before})", flush=True)
    for name, values in got.items():
        rate = statistics.median(values)
        print(f"{name}, {args.threads} threads, batches of 16, {len(texts)} passages: median {rate:.2f} passages/s "
              f"(best {max(values):.2f}); 4,000 passages in {4000 / rate / 60:.1f} min")


def query(args) -> None:
    import torch

    st = model(1)
    folder = cache_root() / gemma.EXPORT_FOLDER
    if not gemma.exported(folder, gemma.weights_sha256()):
        gemma.export_onnx(st, folder, gemma.weights_sha256())
    texts = [gemma.QUERY_PROMPT + SCENE]
    for threads in (1, 2):
        torch.set_num_threads(threads)
        run = session(folder / gemma.ENCODER_FILE, threads)
        runs = {"pytorch": lambda: st.encode(texts, convert_to_numpy=True, show_progress_bar=False),
                "onnx fp32": lambda run=run: gemma.encode_onnx(st, run, texts)}
        times: dict[str, list[float]] = {name: [] for name in runs}
        for do in runs.values():
            do(), do()
        for _ in range(args.rounds):
            for name, do in runs.items():
                started = time.perf_counter()
                do()
                times[name].append((time.perf_counter() - started) * 1000)
        for name, values in times.items():
            print(f"one query ({len(SCENE)} characters), {threads} thread(s), {name}: median {statistics.median(values):.0f} ms "
                  f"(fastest {min(values):.0f}) of {args.rounds}, {load1()}", flush=True)


def _hold(way: str) -> None:
    """In a fresh process: the embedder as the engine holds it, 16 passages, one query."""
    from engine.providers.embedders import EmbeddingGemmaEmbedder

    embedder = EmbeddingGemmaEmbedder(int8=way == "int8")
    if way == "pytorch" and embedder.query_export_ready():
        raise SystemExit("move the export aside to measure PyTorch alone")
    embedder.embed(_sample(passages(), 16, 7))
    embedder.embed_query([SCENE])
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{way}: queries through {embedder.query_backend}, peak resident {peak:,.0f} MB")


def memory(args) -> None:
    folder = cache_root() / gemma.EXPORT_FOLDER
    aside = folder.with_name(folder.name + ".aside")
    command = [sys.executable, "-m", "experiments.embeddinggemma_cost", "_hold"]
    subprocess.run([*command, "onnx"], check=True)
    subprocess.run([*command, "int8"], check=True)
    os.replace(folder, aside)
    try:
        subprocess.run([*command, "pytorch"], check=True)
    finally:
        os.replace(aside, folder)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m experiments.embeddinggemma_cost", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=["lengths", "fidelity", "rates", "query", "memory", "_hold"])
    parser.add_argument("way", nargs="?", default="onnx")
    parser.add_argument("--n", type=int, default=None, help="passages (fidelity 200, rates 32)")
    parser.add_argument("--rounds", type=int, default=None, help="interleaved rounds (rates 3, query 15)")
    parser.add_argument("--threads", type=int, default=2, help="threads for rates")
    args = parser.parse_args(argv)
    args.n = args.n or (200 if args.what == "fidelity" else 32)
    args.rounds = args.rounds or (15 if args.what == "query" else 3)
    if args.what == "_hold":
        return _hold(args.way)
    {"lengths": lengths, "fidelity": fidelity, "rates": rates, "query": query, "memory": memory}[args.what](args)


if __name__ == "__main__":
    main()
