"""The branching story: lineage, the tree's operations, and save points."""
from . import lineage, savepoints
from .lineage import Path, path_to
from .tree import INPUT_KINDS, RESTING, StoryTree

__all__ = ["INPUT_KINDS", "RESTING", "Path", "StoryTree", "lineage", "path_to", "savepoints"]
