"""mindloop's performance benchmark (run it with `python bench/run.py`)."""
