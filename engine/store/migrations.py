"""The schema, as an ordered list of named migration steps.

`PRAGMA user_version` records how many have run. The list is append-only:
never edit or reorder a migration that has shipped, add a new one. A file
whose version is higher than this list is long was written by a newer
workbench and is refused rather than guessed at.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from sqlite3 import Connection

from ..errors import SchemaTooNew
from . import (
    cards_tables,
    knowledge_tables,
    media_tables,
    memory_tables,
    narrative_tables,
    record_tables,
    revision_tables,
)

__all__ = ["LATEST", "MIGRATIONS", "Migration", "migrate", "version_of"]


def _run(db: Connection, script: str) -> None:
    """Run each statement of `script` inside the caller's transaction.

    (`executescript` would commit first, breaking the one-step-one-transaction
    rule.)"""
    for statement in script.split(";"):
        if statement.strip():
            db.execute(statement)


def _v1_story_tree(db: Connection) -> None:
    _run(
        db,
        """
        CREATE TABLE campaigns (
            id INTEGER PRIMARY KEY,
            title VARCHAR(200) NOT NULL DEFAULT '',
            premise TEXT NOT NULL DEFAULT '',
            protagonist VARCHAR(200) NOT NULL DEFAULT '',
            ai_instructions TEXT NOT NULL DEFAULT '',
            authors_note TEXT NOT NULL DEFAULT '',
            narration_length VARCHAR(20) NOT NULL DEFAULT '',
            canon JSON NOT NULL DEFAULT '{}',
            state JSON NOT NULL DEFAULT '{}',
            head_branch_id INTEGER REFERENCES branches(id) ON DELETE SET NULL,
            head_depth INTEGER NOT NULL DEFAULT -1,
            created_at DATETIME NOT NULL,
            updated_at DATETIME NOT NULL
        );
        CREATE TABLE branches (
            id INTEGER PRIMARY KEY,
            campaign_id INTEGER NOT NULL REFERENCES campaigns(id) ON DELETE CASCADE,
            parent_id INTEGER REFERENCES branches(id) ON DELETE CASCADE,
            fork_depth INTEGER NOT NULL DEFAULT -1,
            created_at DATETIME NOT NULL
        );
        CREATE INDEX ix_branches_campaign ON branches (campaign_id);
        CREATE TABLE nodes (
            id INTEGER PRIMARY KEY,
            campaign_id INTEGER NOT NULL REFERENCES campaigns(id) ON DELETE CASCADE,
            branch_id INTEGER NOT NULL REFERENCES branches(id) ON DELETE CASCADE,
            depth INTEGER NOT NULL,
            parent_id INTEGER REFERENCES nodes(id) ON DELETE SET NULL,
            kind VARCHAR(20) NOT NULL,
            text TEXT NOT NULL DEFAULT '',
            raw_text TEXT NOT NULL DEFAULT '',
            reasoning TEXT,
            live BOOLEAN NOT NULL DEFAULT 1,
            edited BOOLEAN NOT NULL DEFAULT 0,
            state_after JSON NOT NULL DEFAULT '{}',
            created_at DATETIME NOT NULL
        );
        -- One node per coordinate: a retry or an edit opens a branch of its own.
        CREATE UNIQUE INDEX ux_nodes_branch_depth ON nodes (branch_id, depth);
        CREATE INDEX ix_nodes_campaign ON nodes (campaign_id);
        CREATE INDEX ix_nodes_parent ON nodes (parent_id);
        CREATE TABLE turn_records (
            node_id INTEGER PRIMARY KEY REFERENCES nodes(id) ON DELETE CASCADE,
            narrator VARCHAR(200) NOT NULL DEFAULT '',
            report JSON NOT NULL DEFAULT '{}',
            usage JSON NOT NULL DEFAULT '{}',
            accounting JSON NOT NULL DEFAULT '{}',
            window JSON NOT NULL DEFAULT '{}',
            timings JSON NOT NULL DEFAULT '{}'
        );
        CREATE TABLE save_points (
            id INTEGER PRIMARY KEY,
            campaign_id INTEGER NOT NULL REFERENCES campaigns(id) ON DELETE CASCADE,
            name VARCHAR(200) NOT NULL,
            note TEXT NOT NULL DEFAULT '',
            branch_id INTEGER NOT NULL REFERENCES branches(id),
            depth INTEGER NOT NULL,
            created_at DATETIME NOT NULL
        );
        CREATE INDEX ix_save_points_campaign ON save_points (campaign_id);
        CREATE TABLE settings (
            key VARCHAR(100) PRIMARY KEY,
            value JSON
        );
        """
    )


def _token_ratios(db: Connection) -> None:
    """Server tokens per cl100k token, measured per model (engine.budget.ratios.TokenRatios)."""
    db.execute(
        """CREATE TABLE token_ratios (
            model_key VARCHAR(500) PRIMARY KEY,
            ratio FLOAT NOT NULL,
            last_observed FLOAT NOT NULL,
            samples INTEGER NOT NULL,
            source VARCHAR(40) NOT NULL,
            updated_at DATETIME NOT NULL
        )"""
    )


@dataclass(frozen=True)
class Migration:
    """One step of the schema: its version is its place in MIGRATIONS, its
    name says what it does (and is what a failure names)."""

    name: str
    run: Callable[[Connection], None]

    def __call__(self, db: Connection) -> None:
        self.run(db)


# Append-only. A step holds the SQL it runs, or imports a frozen module of
# its own version (store/frozen/); never live engine code.
MIGRATIONS: list[Migration] = [
    Migration("v1_story_tree", _v1_story_tree),
    Migration("v2_knowledge_library", knowledge_tables.migrate),
    Migration("v3_memory_bank_and_summaries", memory_tables.migrate),
    Migration("v4_narrative_state_events", narrative_tables.migrate),
    Migration("v5_story_cards", cards_tables.migrate),
    Migration("v6_card_triggering", cards_tables.migrate_triggering),  # constant, enabled, origin
    Migration("v7_prompt_texts_and_records_v3", record_tables.migrate),  # frozen/v7_records.py
    Migration("v8_token_ratios", _token_ratios),  # per-model correction of the token estimate
    Migration("v9_active_memory_indexes", memory_tables.migrate_active_indexes),
    Migration("v10_visual_profiles", media_tables.migrate),  # one per entity (engine.media)
    Migration("v11_knowledge_stage_vectors", knowledge_tables.migrate_stage_vectors),  # second-stage vectors
    Migration("v12_card_secondary_keys", cards_tables.migrate_secondary),  # secondary keys and their logic
    Migration("v13_node_revisions", revision_tables.migrate),  # a passage edited in place keeps its old texts
    Migration("v14_text_vectors", memory_tables.migrate_text_vectors),  # story lines' and summaries' vectors
]
LATEST = len(MIGRATIONS)


def version_of(db: Connection) -> int:
    return db.execute("PRAGMA user_version").fetchone()[0]


def migrate(db: Connection, path: str = "") -> int:
    """Bring `db` up to `LATEST`, one committed step at a time.

    Each step and its version bump share one transaction, so a crash leaves the
    file at a whole version, never between two.
    """
    current = version_of(db)
    if current > LATEST:
        raise SchemaTooNew(
            f"{path or 'This database'} has schema version {current}, but this workbench "
            f"knows versions up to {LATEST}. It was written by a newer workbench: upgrade "
            "the workbench (pip install -U story-workbench) rather than open it with this one. "
            "Nothing was changed."
        )
    while current < LATEST:
        # The write lock first, then the version read again inside it: a
        # second process opening the same new file waits here and then finds
        # the step done, instead of running it twice ("duplicate column").
        db.execute("BEGIN IMMEDIATE")
        try:
            current = version_of(db)
            if current < LATEST:
                MIGRATIONS[current](db)
                current += 1
                db.execute(f"PRAGMA user_version = {current}")
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
    return LATEST
