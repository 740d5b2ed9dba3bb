"""Code a migration needs, copied as it was when that migration was written.

A migration runs on files written years apart; it must do today what it did
the day it shipped. So it never imports live engine code (whose record format,
rendering or lineage may change): each step that needs more than SQL reads a
module here named for its version, and nothing here is ever edited.
"""
