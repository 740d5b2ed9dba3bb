"""The code behind the research notebooks: importable, tested, and thin
enough that each notebook reads as a short script."""
