"""The write is one transaction: a failure part-way leaves nothing, and the
next import works (CB-11). A knowledge index that cannot be rebuilt is the
one failure that does not cost the import."""
import json

import pytest
from sqlalchemy import select

from engine.bundle import write
from engine.knowledge import KnowledgeRefused
from engine.store.knowledge_tables import KnowledgeSourceRow


def test_a_failure_midway_through_the_write_rolls_everything_back(counted, rich, monkeypatch):
    wb, count = counted
    before = count()
    reached = []

    def broken(session, plan, campaign_id, branches):
        reached.append(session.execute(select(KnowledgeSourceRow.id)).all())  # earlier writers ran
        raise OSError("disk full")

    monkeypatch.setattr(write, "_write_summaries", broken)
    with pytest.raises(OSError, match="disk full"):
        wb.import_campaign(rich[2])
    assert reached and count() == before
    monkeypatch.undo()
    report = wb.import_campaign(rich[2])  # the session was not poisoned
    assert report.counts["summaries"] >= 1 and count()["campaigns"] == before["campaigns"] + 1


def test_a_failure_while_indexing_knowledge_keeps_the_import_and_warns(counted, rich, monkeypatch):
    wb, _ = counted

    def broken(session, source, **_):
        raise KnowledgeRefused("the chunker gave up")

    monkeypatch.setattr(write, "build_passages", broken)
    report = wb.import_campaign(rich[2])
    assert len([w for w in report.warnings if "could not be rebuilt" in w]) == 3
    with wb.db.reading() as s:
        rows = s.scalars(select(KnowledgeSourceRow).where(KnowledgeSourceRow.campaign_id == report.campaign_id)).all()
        assert {r.index_state for r in rows} == {"failed"} and "chunker gave up" in rows[0].index_detail
    assert len(wb.campaign(report.campaign_id).history()) == 5


def test_a_crash_inside_an_index_rebuild_is_contained_by_its_savepoint(counted, rich, monkeypatch):
    wb, _ = counted
    real = write.build_passages

    def half(session, source, **kw):
        real(session, source, **kw)
        raise RuntimeError("power cut after the passages")

    monkeypatch.setattr(write, "build_passages", half)
    report = wb.import_campaign(rich[2])
    assert all("power cut" in w for w in report.warnings if "index" in w)
    with wb.db.reading() as s:
        from engine.store.knowledge_tables import KnowledgePassageRow

        ids = s.scalars(select(KnowledgeSourceRow.id).where(KnowledgeSourceRow.campaign_id == report.campaign_id)).all()
        assert s.scalars(select(KnowledgePassageRow).where(KnowledgePassageRow.source_id.in_(ids))).all() == []


def test_imports_do_not_touch_other_campaigns(counted, rich):
    wb, count = counted
    first = wb.import_campaign(rich[2])
    history = [e.text for e in wb.campaign(first.campaign_id).history()]
    second = wb.import_campaign(json.loads(rich[2].read_text(encoding="utf-8")))
    assert second.campaign_id != first.campaign_id
    assert [e.text for e in wb.campaign(first.campaign_id).history()] == history
    assert [e.text for e in wb.campaign(second.campaign_id).history()] == history
