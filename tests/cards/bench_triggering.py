"""How long choosing the fired cards takes: 1,000 cards of 3 keys, four story
texts of 120 words and an input. Run: .venv/bin/python tests/cards/bench_triggering.py"""
import random
import time

from engine.cards import Card, fired_cards

random.seed(1)
words = [f"name{i}" for i in range(3000)]
cards = [Card(id=i, title=f"c{i}", keys=tuple(random.sample(words, 3)), entry="text " * 40, card_type="", notes="",
              constant=i % 100 == 0, enabled=True, origin="", created_at=None) for i in range(1000)]
story = [" ".join(random.choices(words + ["the"] * 3000, k=120)) for _ in range(4)]
fired_cards(cards, story, "I ask name5 about it")  # compile the keys once (cached per key)
times = []
for _ in range(20):
    start = time.perf_counter()
    fired = fired_cards(cards, story, "I ask name5 about it")
    times.append(time.perf_counter() - start)
times.sort()
print(f"1,000 cards x 3 keys, 4 story texts of 120 words + input: median {times[10] * 1000:.1f} ms, "
      f"{len(fired)} fired")
